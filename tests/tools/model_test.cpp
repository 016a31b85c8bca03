// tools/model: megatron-core's GPT model on CPU, base against head (issue 32), and the memory
// snapshots of tools/model and recheck memory as PyTorch's viewer reads them. Each run builds
// the model and trains two iterations per variant (seconds); skipped without megatron-core.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/megatron_tree.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

// The venv megatron-core is installed in: the Python tools/model must run under.
std::string venv_of_megatron() {
  const std::string random_py = megatron_random_py();
  return random_py.empty() ? "" : random_py.substr(0, random_py.find("/lib/python"));
}

test_shell::Result model(const std::string& options) {
  return test_shell::run_shell(std::string(test_paths::source_dir()) + "/tools/model --iterations 2 --venv " +
                               venv_of_megatron() + " " + options);
}

// 0.16.1's GPTModel with full recompute: the clearing change computes the base's bits, and
// nothing keeps a recomputation input alive after the step, so it frees nothing (the truth,
// stated); with something retaining them (--retain), it frees exactly their .grad bytes, and
// the report names what holds each.
TEST(Model, the_clearing_change_on_megatron_s_gpt_model_is_bitwise_and_frees_what_is_retained) {
  if (venv_of_megatron().empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string json = ::testing::TempDir() + "/model.json";
  const auto plain = model("--json " + json);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("iteration 1, base: 0 of 6 recomputation inputs alive after the step: nothing retained"),
            std::string::npos)
      << plain.output;
  const nlohmann::json report = nlohmann::json::parse(test_shell::run_shell("cat " + json).output);
  for (const auto& row : report.at("iterations")) {
    EXPECT_TRUE(row.at("head_vs_base").at("loss_equal").get<bool>());
    EXPECT_TRUE(row.at("head_vs_base").at("grads_differing").empty());
    EXPECT_TRUE(row.at("head_vs_no_recompute").at("grads_differing").empty());
    EXPECT_EQ(row.at("freed").get<int64_t>(), 0);
  }
  const auto retained = model("--retain --json " + json);
  ASSERT_EQ(retained.exit_code, 0) << retained.output;
  EXPECT_NE(retained.output.find("held by\n    <global gpt_model>.RETAINED[0]"), std::string::npos) << retained.output;
  const nlohmann::json held = nlohmann::json::parse(test_shell::run_shell("cat " + json).output);
  for (const auto& row : held.at("iterations")) {
    EXPECT_GT(row.at("freed").get<int64_t>(), 0);
    EXPECT_EQ(row.at("freed"), row.at("predicted"));
  }
}

// A head that clears before backward collects loses the gradients: exit 1, the parameters named.
TEST(Model, a_head_that_loses_the_gradients_fails) {
  const std::string random_py = megatron_random_py();
  if (random_py.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  std::ifstream in(random_py);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string collect =
      "        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached_inputs)\n";
  ASSERT_NE(text.find(collect), std::string::npos);
  text.replace(text.find(collect), 0,
               "        for inp in detached_inputs:\n            if isinstance(inp, torch.Tensor):\n"
               "                inp.grad = None\n");
  const std::string head = ::testing::TempDir() + "/head-lost.py";
  std::ofstream(head) << text;
  const auto lost = model("--head " + head);
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  EXPECT_NE(lost.output.find("FAIL: the head's losses, gradients or parameters differ"), std::string::npos) << lost.output;
}

// The change's own configuration, small: a Megatron-LM dev tree (RECHECK_MEGATRON_DEV_TREE, the
// folder holding megatron/; git archive of NVIDIA/Megatron-LM's dev branch) with hyper-connections
// and 4 residual streams. Each layer's recomputation input stays alive after the step, and the
// change frees its .grad: exactly the prediction, layers x sequence x streams x hidden x 4 bytes.
// The tree's commit the figures were taken at: d48bd6be0a (docs/memory.md).
TEST(Model, on_a_dev_tree_with_residual_streams_the_change_frees_each_layer_s_input_grad) {
  const char* tree = std::getenv("RECHECK_MEGATRON_DEV_TREE");
  if (tree == nullptr || *tree == '\0') GTEST_SKIP() << "RECHECK_MEGATRON_DEV_TREE names no Megatron-LM dev tree";
  if (venv_of_megatron().empty()) GTEST_SKIP() << "no venv with torch and megatron-core's dependencies";
  const std::string json = ::testing::TempDir() + "/model-dev.json";
  const auto run = model("--megatron " + std::string(tree) +
                         " --config enable_hyper_connections=True --config num_residual_streams=4 --json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // What keeps it: the last tensor the layer fed its pre-MLP norm, kept on the layer, whose graph
  // reaches the input's AccumulateGrad.
  EXPECT_NE(run.output.find("AccumulateGrad.variable in the graph of a tensor [32, 1, 64] held by "
                            "model.decoder.layers.0.mlp_norm_manager.tensor"),
            std::string::npos)
      << run.output;
  const nlohmann::json report = nlohmann::json::parse(test_shell::run_shell("cat " + json).output);
  for (const auto& row : report.at("iterations")) {
    EXPECT_TRUE(row.at("head_vs_base").at("grads_differing").empty());
    EXPECT_EQ(row.at("freed").get<int64_t>(), 2 * 32 * 4 * 64 * 4);  // 2 layers, sequence 32, 4 streams, hidden 64
    EXPECT_EQ(row.at("freed"), row.at("predicted"));
  }
}

// The snapshots, as PyTorch's viewer reads them (tests/check_memory_snapshot.py): trace_plot
// renders each, the trace ends at the variant's floor, and the base's allocations are named by
// phase, each layer's recomputation included; recheck memory's own, likewise.
std::string check_snapshot(const std::string& pickle, int64_t floor, const std::string& phases) {
  const auto r = test_shell::run_shell(std::string(test_paths::python_executable()) + " " + test_paths::source_dir() +
                                       "/tests/check_memory_snapshot.py " + pickle + " " + std::to_string(floor) + " " +
                                       phases);
  return r.exit_code == 0 ? "" : r.output;
}

TEST(Model, snapshots_render_in_torch_s_viewer_and_end_at_each_variant_s_floor) {
  if (venv_of_megatron().empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string prefix = ::testing::TempDir() + "/gpt";
  const std::string json = prefix + ".json";
  const auto run = model("--snapshot " + prefix + " --json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json report = nlohmann::json::parse(test_shell::run_shell("cat " + json).output);
  const nlohmann::json& last = report.at("iterations").back();
  for (const std::string variant : {"no-recompute", "base", "head"}) {
    const std::string phases = variant == "no-recompute" ? "forward backward" : "forward backward 'layer 1' 'layer 2'";
    EXPECT_EQ(check_snapshot(prefix + "-" + variant + ".pickle", last.at("floor").at(variant).get<int64_t>(), phases), "")
        << variant;
  }
}

TEST(MemorySnapshot, recheck_memory_s_snapshots_render_in_torch_s_viewer_and_end_at_the_floors) {
  const std::string prefix = ::testing::TempDir() + "/memory";
  const auto run = test_shell::run_shell(std::string(test_paths::recheck_binary()) + " memory --svg '' --snapshot " + prefix +
                                         " --json " + prefix + ".json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json report = nlohmann::json::parse(test_shell::run_shell("cat " + prefix + ".json").output);
  const nlohmann::json& last = report.at("iterations").back();
  EXPECT_EQ(check_snapshot(prefix + "-sut.pickle", last.at("floor_sut"), "forward 'layer 1' 'layer 2'"), "");
  EXPECT_EQ(check_snapshot(prefix + "-oracle.pickle", last.at("floor_oracle"), "forward 'layer 1' 'layer 2'"), "");
}

// The finding's standalone script (docs/scripts/), with torch and the dev tree alone: it shows
// the retention with hyper-connections (exit 1) and none with the plain layer (exit 0).
TEST(Model, the_standalone_script_shows_the_dev_tree_s_retention_and_none_without_streams) {
  const char* tree = std::getenv("RECHECK_MEGATRON_DEV_TREE");
  if (tree == nullptr || *tree == '\0') GTEST_SKIP() << "RECHECK_MEGATRON_DEV_TREE names no Megatron-LM dev tree";
  const std::string script = std::string(test_paths::python_executable()) + " " + test_paths::source_dir() +
                             "/docs/scripts/hyper_connections_keep_layer_inputs.py " + tree;
  const auto streams = test_shell::run_shell(script);
  EXPECT_EQ(streams.exit_code, 1) << streams.output;
  EXPECT_NE(streams.output.find("2 of 6 recomputation inputs alive after the step\n  [32, 1, 256]: 32768 bytes, "
                                ".grad 32768 bytes"),
            std::string::npos)
      << streams.output;
  const auto plain = test_shell::run_shell(script + " --plain");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("0 of 6 recomputation inputs alive"), std::string::npos) << plain.output;
}

TEST(Model, bad_input_is_one_line_and_exit_2) {
  if (venv_of_megatron().empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  // A tree whose megatron package cannot be imported (an old tree's training-code imports).
  const std::string broken = ::testing::TempDir() + "/broken-tree";
  ASSERT_EQ(test_shell::run_shell("mkdir -p " + broken + "/megatron/core/models/gpt && touch " + broken +
                                  "/megatron/core/models/gpt/gpt_model.py && echo \"raise ImportError('no apex')\" > " +
                                  broken + "/megatron/__init__.py")
                .exit_code,
            0);
  for (const std::string& options : {std::string("--layers 0"), std::string("--megatron /tmp"),
                                     std::string("--head /nonexistent.py"), std::string("--heads 3"),
                                     "--megatron " + broken, std::string("--config 4"),
                                     std::string("--snapshot /nonexistent/folder/x"), std::string("--dtype int8")}) {
    const auto run = model(options);
    EXPECT_EQ(run.exit_code, 2) << options << "\n" << run.output;
    EXPECT_EQ(run.output.find("Traceback"), std::string::npos) << options << "\n" << run.output;
    EXPECT_EQ(run.output.rfind("tools/model: ", 0), 0u) << options << "\n" << run.output;
  }
  // A device without CUDA: one line, exit 2 (where this torch sees a GPU, the run would be real).
  if (test_shell::run_shell(std::string(test_paths::python_executable()) + " -c 'import torch, sys; "
                            "sys.exit(torch.cuda.is_available())'").exit_code == 0) {
    const auto cuda = model("--device cuda");
    EXPECT_EQ(cuda.exit_code, 2) << cuda.output;
    EXPECT_NE(cuda.output.find("tools/model: --device cuda: torch "), std::string::npos) << cuda.output;
    EXPECT_EQ(cuda.output.find("Traceback"), std::string::npos) << cuda.output;
  }
}

}  // namespace
}  // namespace recheck
