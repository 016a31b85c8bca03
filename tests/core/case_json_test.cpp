// The case model's JSON form: lossless round trips, and errors that name the field.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/errors.h"
#include "properties/generator.h"
#include "tests/minimal_case.h"
#include "tests/paths.h"

namespace recheck {
namespace {

using nlohmann::json;
using test_cases::minimal;

std::string load_error(const json& j) {
  try {
    case_from_json(j);
  } catch (const CaseError& error) {
    return error.what();
  }
  return "no error";
}

std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(test_paths::source_dir()) + "/corpus")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  return files;
}

TEST(CaseJson, every_corpus_file_round_trips_without_loss) {
  const auto files = corpus_files();
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) {
    std::ifstream in(file);
    const json original = json::parse(in);
    const Case c = load_case_file(file.string());
    EXPECT_EQ(to_json(c), original) << file;
    EXPECT_EQ(to_json(case_from_json(to_json(c))), to_json(c)) << file;
  }
}

TEST(CaseJson, generated_cases_round_trip_without_loss) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    const json once = to_json(c);
    EXPECT_EQ(to_json(case_from_json(once)), once) << "draw seed " << seed;
  }
}

// A checkpoint function's call options (core/case.h, Checkpoint::options): drawn only for a
// function that declares them, written and read back, shown, and refused by one that does not
// take them.
TEST(CaseJson, call_options_round_trip_and_show_and_only_a_declaring_function_draws_them) {
  GenOptions options;
  options.call_options = {CallOption{"early_stop", {"True", "False"}, {}}, CallOption{"policy", {"none", "save"}, {}}};
  int passing = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const Case c = draw_case(options, seed);
    const json once = to_json(c);
    EXPECT_EQ(to_json(case_from_json(once)), once) << "draw seed " << seed;
    if (once.dump().find("\"options\"") != std::string::npos) ++passing;
    // Without declared options the same seed draws the case it always drew: no option anywhere.
    EXPECT_EQ(to_json(draw_case(GenOptions{}, seed)).dump().find("\"options\""), std::string::npos);
  }
  EXPECT_GT(passing, 20);
  json j = minimal();
  j["root"] = json::parse(R"({"ops": [{"op": "checkpoint", "distribute": false, "options": {"early_stop": "False"},
    "args": [{"ref": 0}], "body": {"ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}}], "outputs": [1]})");
  const Case c = case_from_json(j);
  EXPECT_NE(show(c).find("checkpoint(distribute=False, early_stop=False, v0)"), std::string::npos) << show(c);
  j["root"]["ops"][0]["options"] = json::parse(R"({"early_stop": 1})");
  EXPECT_NE(load_error(j).find("root.ops[0].options.early_stop"), std::string::npos) << load_error(j);
}

TEST(CaseJson, unknown_version_is_refused) {
  json j = minimal();
  j["version"] = 2;
  EXPECT_EQ(load_error(j), "case.version: this recheck reads version 1, the file has version 2");
}

TEST(CaseJson, error_names_the_field_path_and_what_was_expected) {
  json j = minimal();
  j["root"]["ops"][0]["fn"] = "cosh";
  EXPECT_EQ(load_error(j),
            "case.root.ops[0].fn: expected one of \"tanh\", \"sigmoid\", \"neg\", \"square\", \"relu\", found \"cosh\"");
}

TEST(CaseJson, unknown_op_is_refused) {
  json j = minimal();
  j["root"]["ops"][0]["op"] = "conv";
  EXPECT_NE(load_error(j).find("case.root.ops[0].op: expected one of \"unary\""), std::string::npos);
}

TEST(CaseJson, reference_to_a_later_value_is_refused) {
  json j = minimal();
  j["root"]["ops"][0]["x"] = 1;
  EXPECT_EQ(load_error(j), "case.root.ops[0].x: value v1 is not defined here (v0..v0 are)");
  j["root"]["ops"][0] = {{"op", "binary"}, {"fn", "add"}, {"a", 0}, {"b", 7}};
  EXPECT_EQ(load_error(j), "case.root.ops[0].b: value v7 is not defined here (v0..v0 are)");
}

// A random op's p is what its fn reads: a dropout probability, rrelu's upper slope, a
// temperature; randperm reads none.
TEST(CaseJson, a_random_op_s_p_out_of_its_fn_s_range_is_refused) {
  json j = minimal();
  j["root"]["ops"][0] = {{"op", "random"}, {"fn", "rrelu"}, {"source", "cpu"}, {"p", 0.1}, {"x", 0}};
  EXPECT_EQ(load_error(j), "case.root.ops[0].p: expected rrelu's upper slope in [0.125, 1], found 0.1");
  j["root"]["ops"][0]["p"] = 1.0 / 3.0;
  EXPECT_EQ(load_error(j), "no error");
  j["root"]["ops"][0]["fn"] = "dropout";
  j["root"]["ops"][0]["p"] = 1.0;
  EXPECT_EQ(load_error(j).rfind("case.root.ops[0].p: expected a dropout probability in [0, 1), found 1", 0), 0u) << load_error(j);
  j["root"]["ops"][0]["fn"] = "multinomial";
  j["root"]["ops"][0]["p"] = 0.0;
  EXPECT_EQ(load_error(j).rfind("case.root.ops[0].p: expected a temperature in (0, 1e6], found 0", 0), 0u) << load_error(j);
  j["root"]["ops"][0]["fn"] = "randperm";
  EXPECT_EQ(load_error(j), "no error");
  j["root"]["ops"][0]["p"] = 0.5;
  EXPECT_EQ(load_error(j).rfind("case.root.ops[0].p: expected 0 (randperm takes no p), found 0.5", 0), 0u) << load_error(j);
}

// A capture reads a leaf of the case from any depth: one the case lacks is refused, and so is a
// checkpoint's body that returns the leaf itself (the function would make it its own output).
TEST(CaseJson, a_capture_names_one_of_the_case_s_leaves_and_a_body_does_not_return_it_as_it_is) {
  json j = minimal();
  j["root"]["ops"].push_back(json::parse(R"({"op": "checkpoint", "distribute": false, "args": [{"ref": 1}],
      "body": {"ops": [{"op": "capture", "leaf": 0}, {"op": "binary", "fn": "mul", "a": 0, "b": 1}], "outputs": [2]}})"));
  j["root"]["outputs"] = {2};
  EXPECT_EQ(load_error(j), "no error");
  const Case c = case_from_json(j);
  EXPECT_EQ(to_json(c), to_json(case_from_json(to_json(c))));
  EXPECT_NE(show(c).find("capture(leaves[0])"), std::string::npos) << show(c);
  j["root"]["ops"][1]["body"]["ops"][0]["leaf"] = 1;
  EXPECT_EQ(load_error(j), "case.root.ops[1].body.ops[0].leaf: leaf 1 is not one of the case's 1 leaves");
  j["root"]["ops"][1]["body"]["ops"][0]["leaf"] = 0;
  j["root"]["ops"][1]["body"]["outputs"] = {1};
  EXPECT_EQ(load_error(j),
            "case.root.ops[1].body.outputs[0]: a checkpoint's body returns a captured leaf itself (return a value "
            "computed from it)");
  // Through a region inline in the body too: the value is still the leaf.
  j["root"]["ops"][1]["body"] = json::parse(R"({"ops": [{"op": "fork", "tracker_state": "model-parallel-rng", "args": [],
      "body": {"ops": [{"op": "capture", "leaf": 0}], "outputs": [0]}}], "outputs": [1]})");
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].body.outputs[0]: a checkpoint's body returns a captured leaf itself", 0), 0u)
      << load_error(j);
  // And through a raise, which yields it where it does not raise (a 100,000-case run met this
  // one: the recomputation waited on its own node until --case-seconds killed it).
  j["root"]["ops"][1]["body"] = json::parse(R"({"ops": [{"op": "capture", "leaf": 0},
      {"op": "raise", "x": 1, "when": "first-iteration"}], "outputs": [2]})");
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].body.outputs[0]: a checkpoint's body returns a captured leaf itself", 0), 0u)
      << load_error(j);
}

// A hook op hangs on a tensor and yields it again: its kind and scale round-trip (a scale of 1 is
// left out), a kind it does not know and a hook on a non-tensor are refused, and a body cannot
// return a captured leaf through it.
TEST(CaseJson, a_hook_hangs_on_a_tensor_and_yields_it_again) {
  json j = minimal();
  j["root"]["ops"].push_back(json::parse(R"({"op": "hook", "kind": "tensor", "scale": 0.5, "x": 1})"));
  j["root"]["outputs"] = {2};
  EXPECT_EQ(load_error(j), "no error");
  Case c = case_from_json(j);
  EXPECT_EQ(to_json(c), to_json(case_from_json(to_json(c))));
  EXPECT_NE(show(c).find("v2 = tensor_hook(v1, scale=0.5)"), std::string::npos) << show(c);
  std::get<Hook>(c.root.ops[1]).scale = 1.0;
  EXPECT_FALSE(to_json(c)["root"]["ops"][1].contains("scale")) << to_json(c).dump();
  j["root"]["ops"][1]["kind"] = "backward";
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].kind: expected one of \"tensor\"", 0), 0u) << load_error(j);
  j["root"]["ops"][1]["kind"] = "tensor";
  j["root"]["ops"][1]["x"] = 3;
  EXPECT_EQ(load_error(j), "case.root.ops[1].x: value v3 is not defined here (v0..v1 are)");
  j["root"]["ops"][1] = json::parse(R"({"op": "checkpoint", "distribute": false, "args": [null],
      "body": {"ops": [{"op": "hook", "kind": "tensor", "x": 0}], "outputs": [1]}})");
  EXPECT_EQ(load_error(j), "case.root.ops[1].body.ops[0].x: a hook hangs on a tensor, and value 0 is None");
  j["root"]["ops"][1] = json::parse(R"({"op": "checkpoint", "distribute": false, "args": [{"ref": 1}],
      "body": {"ops": [{"op": "capture", "leaf": 0}, {"op": "hook", "kind": "tensor", "x": 1}], "outputs": [2]}})");
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].body.outputs[0]: a checkpoint's body returns a captured leaf itself", 0), 0u)
      << load_error(j);
  // An accumulator hook hangs on a parameter, and does not scale.
  j["root"]["ops"][1] = json::parse(R"({"op": "hook", "kind": "accumulator", "x": 0})");
  EXPECT_EQ(load_error(j), "no error");
  EXPECT_NE(show(case_from_json(j)).find("v2 = accumulator_hook(v0)"), std::string::npos) << show(case_from_json(j));
  j["root"]["ops"][1]["x"] = 1;
  EXPECT_EQ(load_error(j), "case.root.ops[1].x: accumulator hooks hang on a parameter (a leaf that requires grad: a root "
                           "leaf, or what a capture gives a body), and value 1 is not one");
  j["root"]["ops"][1]["x"] = 0;
  j["root"]["ops"][1]["scale"] = 2.0;
  EXPECT_EQ(load_error(j), "case.root.ops[1].scale: accumulator hooks run once the gradient is accumulated and cannot scale it");
  // A post-accumulate-grad hook, the same.
  j["root"]["ops"][1] = json::parse(R"({"op": "hook", "kind": "post-accumulate", "x": 0})");
  EXPECT_EQ(load_error(j), "no error");
  EXPECT_NE(show(case_from_json(j)).find("v2 = post_accumulate_hook(v0)"), std::string::npos) << show(case_from_json(j));
  EXPECT_EQ(to_json(case_from_json(j))["root"]["ops"][1], j["root"]["ops"][1]);
  j["root"]["ops"][1]["x"] = 1;
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].x: post-accumulate hooks hang on a parameter", 0), 0u) << load_error(j);
}

TEST(CaseJson, a_case_says_how_the_training_loop_differentiates_its_loss) {
  json j = test_cases::minimal();
  j["leaves"].push_back(json::parse(R"({"shape": [2], "requires_grad": false, "fill": "ones"})"));
  j["leaves"].push_back(json::parse(R"({"shape": [2], "requires_grad": true, "fill": "ones"})"));
  // Absent: loss.backward(), and written so (absent).
  EXPECT_FALSE(to_json(case_from_json(j)).contains("backward"));
  j["backward"] = json::parse(R"({"call": "grad", "inputs": [2, 0], "twice": true})");
  const Case c = case_from_json(j);
  EXPECT_EQ(c.backward.call, Backward::Call::grad);
  EXPECT_EQ(c.backward.inputs, (std::vector<int>{2, 0}));
  EXPECT_TRUE(c.backward.twice);
  EXPECT_EQ(to_json(c)["backward"], j["backward"]);
  EXPECT_NE(show(c).find("differentiated by torch.autograd.grad, inputs=[v2, v0], twice (the graph retained)"),
            std::string::npos) << show(c);
  j["backward"] = json::parse(R"({"call": "backward", "inputs": [1]})");
  EXPECT_EQ(load_error(j), "case.backward.inputs[0]: leaf 1 does not require grad, and autograd differentiates only "
                           "tensors that do");
  j["backward"] = json::parse(R"({"call": "backward", "inputs": [0, 3]})");
  EXPECT_EQ(load_error(j), "case.backward.inputs[1]: leaf 3 is not one of the case's 3 leaves");
  j["backward"] = json::parse(R"({"call": "backward", "inputs": [2, 2]})");
  EXPECT_EQ(load_error(j), "case.backward.inputs[1]: leaf 2 is named twice");
  j["backward"] = json::parse(R"({"call": "grad"})");
  EXPECT_EQ(load_error(j), "case.backward.inputs: torch.autograd.grad differentiates the leaves it is given, and none is");
  j["backward"] = json::parse(R"({"call": "backward", "retain_graph": true})");
  EXPECT_EQ(load_error(j), "case.backward: unknown field \"retain_graph\"");
  j["backward"] = json::parse(R"({"call": "jvp"})");
  EXPECT_EQ(load_error(j).rfind("case.backward.call: expected one of \"backward\", \"grad\"", 0), 0u) << load_error(j);
}

TEST(CaseJson, a_state_op_reads_and_writes_a_module_s_state) {
  json j = minimal();
  j["root"]["ops"].push_back(json::parse(R"({"op": "state", "fn": "count", "module": 3, "x": 1})"));
  j["root"]["outputs"] = {2};
  EXPECT_EQ(load_error(j), "no error");
  const Case c = case_from_json(j);
  EXPECT_EQ(to_json(c), to_json(case_from_json(to_json(c))));
  EXPECT_NE(show(c).find("v2 = modules[3].count_step(v1)"), std::string::npos) << show(c);
  j["root"]["ops"][1]["fn"] = "running-var";
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].fn: expected one of \"running-mean\", \"count\"", 0), 0u) << load_error(j);
  j["root"]["ops"][1]["fn"] = "running-mean";
  j["root"]["ops"][1]["module"] = 16;
  EXPECT_EQ(load_error(j).rfind("case.root.ops[1].module: expected an integer from 0 to 15", 0), 0u) << load_error(j);
  j["root"]["ops"][1]["module"] = 0;
  j["root"]["ops"][1]["x"] = 2;
  EXPECT_EQ(load_error(j), "case.root.ops[1].x: value v2 is not defined here (v0..v1 are)");
  j["root"]["ops"][1] = json::parse(R"({"op": "argmax", "x": 1})");
  j["root"]["ops"].push_back(json::parse(R"({"op": "state", "fn": "running-mean", "module": 0, "x": 2})"));
  j["root"]["outputs"] = {3};
  EXPECT_EQ(load_error(j), "case.root.ops[2].x: a module's state is computed from a floating-point tensor, and value 2 is a tensor of int64");
}

TEST(CaseJson, misspelt_field_is_refused) {
  json j = minimal();
  j["leaves"][0]["requires_gard"] = true;
  EXPECT_EQ(load_error(j), "case.leaves[0]: unknown field \"requires_gard\"");
}

TEST(CaseJson, wrong_type_is_refused) {
  json j = minimal();
  j["iterations"] = "two";
  EXPECT_EQ(load_error(j), "case.iterations: expected an integer, found \"two\"");
}

TEST(CaseJson, nested_body_errors_name_the_nested_path) {
  json j = minimal();
  j["root"]["ops"].push_back(json::parse(
      R"({"op": "checkpoint", "distribute": false, "args": [{"ref": 1}], "body": {"ops": [], "outputs": [3]}})"));
  EXPECT_EQ(load_error(j), "case.root.ops[1].body.outputs[0]: value v3 is not defined here (v0..v0 are)");
}

TEST(CaseJson, unreadable_file_names_the_file) {
  const std::string path = ::testing::TempDir() + "/broken-case.json";
  {
    std::ofstream out(path);
    out << "{\"format\": \"recheck-case\", ";
  }
  try {
    load_case_file(path);
    FAIL();
  } catch (const CaseError& error) {
    EXPECT_EQ(std::string(error.what()).rfind(path + ": not valid JSON", 0), 0u) << error.what();
  }
}

TEST(CaseJson, save_writes_the_whole_file_or_nothing) {
  const std::string path = ::testing::TempDir() + "/saved-case.json";
  const Case c = case_from_json(minimal());
  save_case_file(c, path);
  EXPECT_EQ(to_json(load_case_file(path)), to_json(c));
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir())) {
    EXPECT_NE(entry.path().filename().string().rfind(".recheck-", 0), 0u) << entry.path();
  }
}

TEST(CaseJson, a_name_at_the_length_limit_is_written_and_a_failed_write_leaves_nothing) {
  // The temporary name must fit too: NAME.tmp.PID did not, for a name of 255 bytes.
  const std::string dir = ::testing::TempDir() + "/atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string longest = dir + "/" + std::string(250, 'a') + ".json";
  write_file_atomically(longest, "{}\n");
  EXPECT_TRUE(std::filesystem::exists(longest));
  for (const std::string& bad : {dir + "/missing/x.json", dir + "/" + std::string(300, 'b')}) {
    try {
      write_file_atomically(bad, "{}\n");
      FAIL() << bad << ": no error";
    } catch (const OutputError& error) {
      EXPECT_EQ(std::string(error.what()).rfind(bad + ": ", 0), 0u) << error.what();
    }
  }
  std::filesystem::create_directories(dir + "/in-the-way.json");
  EXPECT_THROW(write_file_atomically(dir + "/in-the-way.json", "{}\n"), OutputError);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_NE(entry.path().filename().string().rfind(".recheck-", 0), 0u) << "left behind: " << entry.path();
  }
  EXPECT_EQ(files, 2);
}

TEST(CaseJson, a_field_given_twice_is_refused_naming_its_path) {
  // nlohmann::json would keep the last one silently: which seed did the author mean?
  const std::string text = minimal().dump();
  const std::string twice = "{\"seed\": 4, " + text.substr(1);
  try {
    parse_case_text(twice, "twice.json");
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_EQ(std::string(error.what()), "twice.json: case.seed: the field appears twice in its object");
  }
  json j = minimal();
  j["leaves"].push_back(j["leaves"][0]);
  std::string nested = j.dump();
  const std::size_t second_leaf = nested.find("{\"fill\"", nested.find("{\"fill\"") + 1);
  ASSERT_NE(second_leaf, std::string::npos) << nested;
  nested.insert(second_leaf + 1, "\"shape\": [3], ");
  try {
    parse_case_text(nested, "nested.json");
    FAIL() << "no error: " << nested;
  } catch (const CaseError& error) {
    EXPECT_NE(std::string(error.what()).find("nested.json: case.leaves[1].shape: the field appears twice"),
              std::string::npos) << error.what();
  }
  EXPECT_NO_THROW(parse_case_text(text, "once.json"));
}

TEST(CaseJson, only_a_regular_file_is_read_as_a_case) {
  // A pipe would block the read forever, a device like /dev/zero never ends.
  const std::string fifo = ::testing::TempDir() + "/case-fifo.json";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    try {
      load_case_file(path);
      FAIL() << path << ": no error";
    } catch (const CaseError& error) {
      EXPECT_EQ(std::string(error.what()), path + ": not a regular file");
    }
  }
  try {
    read_case_file_text(::testing::TempDir());
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_NE(std::string(error.what()).find("a folder, not a case file"), std::string::npos) << error.what();
  }
  std::filesystem::remove(fifo);
}

TEST(CaseJson, show_prints_nested_bodies_indented) {
  json j = minimal();
  j["root"]["ops"].push_back(json::parse(
      R"({"op": "checkpoint", "distribute": false, "args": [{"ref": 1}, null, {"int": 3}],
          "body": {"ops": [{"op": "unary", "fn": "neg", "x": 0}], "outputs": [3, 2]}})"));
  EXPECT_EQ(show(case_from_json(j)),
            "case: seed 1, float32 on cpu, 1 iteration\n"
            "  v0 = leaf [2] float32 randn requires_grad\n"
            "  v1 = tanh(v0)\n"
            "  v2, v3 = checkpoint(distribute=False, v1, None, 3)\n"
            "    | v0, v1, v2 = inputs\n"
            "    | v3 = neg(v0)\n"
            "    | return v3, v2\n"
            "  return v1\n");
}

}  // namespace
}  // namespace recheck
