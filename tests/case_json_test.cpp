// The case model's JSON form: lossless round trips, and errors that name the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "properties/generator.h"

namespace recheck {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({"format": "recheck-case", "version": 1, "seed": 1, "dtype": "float32",
    "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [2], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}})");
}

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
  for (const auto& entry : std::filesystem::recursive_directory_iterator(RECHECK_SOURCE_DIR "/corpus")) {
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
  EXPECT_EQ(load_error(j), "case.root.ops[0]: value v1 is not defined here (v0..v0 are)");
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
    EXPECT_EQ(entry.path().string().find("saved-case.json.tmp"), std::string::npos);
  }
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

// ---- limits: each refused with an error naming the limit, before anything is allocated ----

std::string load_error(const json& j, const Limits& limits) {
  try {
    case_from_json(j, limits);
  } catch (const CaseError& error) {
    return error.what();
  }
  return "no error";
}

TEST(CaseLimits, each_limit_is_named_in_the_error) {
  json j = minimal();
  j["iterations"] = 101;
  EXPECT_EQ(load_error(j), "case.iterations: iteration count 101 is over the limit iterations=100 (raise it with --limits iterations=N)");
  j = minimal();
  j["leaves"][0]["shape"] = {1 << 13, 1 << 13};  // 2^26 elements: never allocated
  EXPECT_EQ(load_error(j), "case.leaves[0].shape: element count 67108864 is over the limit leaf_elements=16777216 (raise it with --limits leaf_elements=N)");
  j = minimal();
  j["leaves"][0]["shape"] = {4, 4};
  EXPECT_NE(load_error(j, parse_limits("leaf_bytes=32")).find("leaf bytes 64 is over the limit leaf_bytes=32"), std::string::npos);
  EXPECT_THROW(parse_limits("ops=0"), CaseError);
}

TEST(CaseLimits, huge_numbers_do_not_overflow_the_element_count) {
  json j = minimal();
  j["leaves"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 40, 0};
  EXPECT_NE(load_error(j).find("over the limit leaf_elements"), std::string::npos);
}

TEST(CaseLimits, op_count_and_depth_are_checked_while_reading) {
  json j = minimal();
  j["root"]["ops"] = json::array();
  for (int i = 0; i < 5; ++i) j["root"]["ops"].push_back({{"op", "unary"}, {"fn", "tanh"}, {"x", 0}});
  EXPECT_EQ(load_error(j, parse_limits("ops=4")), "case.root.ops[4]: op count 5 is over the limit ops=4 (raise it with --limits ops=N)");
  EXPECT_EQ(load_error(j, parse_limits("ops=5")), "no error");

  // 100,000 nested checkpoint bodies: refused at the limit, not by exhausting the stack.
  json body = {{"ops", json::array()}, {"outputs", json::array()}};
  for (int i = 0; i < 100000; ++i) {
    json outer = {{"ops", json::array({{{"op", "checkpoint"}, {"distribute", false}, {"args", json::array()}, {"body", std::move(body)}}})},
                  {"outputs", json::array()}};
    body = std::move(outer);
  }
  j = minimal();
  j["root"] = std::move(body);
  EXPECT_NE(load_error(j).find("nesting depth 65 is over the limit depth=64"), std::string::npos);
}

TEST(CaseLimits, parse_limits_names_unknown_limits_and_round_trips) {
  try {
    parse_limits("opz=3");
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown limit 'opz' (known: file_bytes, ops, depth"), std::string::npos);
  }
  const Limits changed = parse_limits("ops=7,depth=3");
  EXPECT_EQ(changed.ops, 7);
  EXPECT_EQ(changed.depth, 3);
  EXPECT_EQ(changed.iterations, Limits{}.iterations);
  EXPECT_EQ(describe(parse_limits(describe(changed))), describe(changed));
}

TEST(CaseLimits, a_file_over_the_size_limit_is_refused_before_it_is_read) {
  const std::string path = ::testing::TempDir() + "/big.json";
  {
    std::ofstream out(path);
    out << minimal().dump() << std::string(2000, ' ');
  }
  try {
    load_case_file(path, parse_limits("file_bytes=1000"));
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_NE(std::string(error.what()).find(path + ": file size"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("over the limit file_bytes=1000"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace recheck
