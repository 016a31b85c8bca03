// The case model's limits: each refused with an error naming the limit, before anything is
// allocated; shapes worked out as libtorch works them out.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>

#include "core/case.h"
#include "core/errors.h"
#include "properties/generator.h"
#include "tests/minimal_case.h"
#include "tests/paths.h"

namespace recheck {
namespace {

using nlohmann::json;
using test_cases::minimal;

std::string load_error(const json& j, const Limits& limits = {}) {
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

TEST(CaseLimits, no_limit_can_be_raised_past_its_ceiling) {
  // Past 256, the readers' recursion could exhaust the stack (a case 10,000 deep crashed
  // recheck show); past the others, the counts could wrap around.
  EXPECT_EQ(parse_limits("depth=256").depth, 256);
  for (const char* item : {"depth=257", "depth=9223372036854775807", "leaf_elements=1099511627777",
                           "leaf_bytes=17592186044417", "value_bytes=1125899906842625", "ops=100000001", "iterations=1000001", "file_bytes=17179869185"}) {
    try {
      parse_limits(item);
      FAIL() << item << ": no error";
    } catch (const CaseError& error) {
      EXPECT_NE(std::string(error.what()).find("needs a whole number from 1 to "), std::string::npos) << error.what();
    }
  }
}

TEST(CaseLimits, raised_limits_do_not_let_a_count_wrap_around) {
  // 2^32 * 2^32 is 0 in int64_t arithmetic: a huge leaf must not read as an empty one.
  const Limits raised = parse_limits("leaf_elements=1099511627776,leaf_bytes=17592186044416");
  json j = minimal();
  j["leaves"][0]["shape"] = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_EQ(load_error(j, raised),
            "case.leaves[0].shape: element count more than 1099511627776 is over the limit leaf_elements=1099511627776 "
            "(raise it with --limits leaf_elements=N)");
  Case c = case_from_json(minimal());
  c.leaves[0].shape = {int64_t{1} << 32, int64_t{1} << 32};
  try {
    validate(c, raised);
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_NE(std::string(error.what()).find("element count more than"), std::string::npos) << error.what();
  }
  // Leaves of 2^40 float64 elements, 2^43 bytes each: the third takes the sum over 2^44.
  j = minimal();
  j["dtype"] = "float64";
  j["leaves"] = json::array();
  for (int i = 0; i < 16; ++i) j["leaves"].push_back({{"shape", {int64_t{1} << 40}}, {"requires_grad", false}, {"fill", "ones"}});
  EXPECT_NE(load_error(j, raised).find("case.leaves[2]: leaf bytes 26388279066624 is over the limit leaf_bytes"),
            std::string::npos) << load_error(j, raised);
}

TEST(CaseLimits, a_case_as_deep_as_the_depth_ceiling_is_read_shown_and_written) {
  json body = {{"ops", json::array({{{"op", "unary"}, {"fn", "tanh"}, {"x", 0}}})}, {"outputs", {1}}};
  for (int level = 0; level < 256; ++level) {
    json op = {{"op", "checkpoint"}, {"distribute", false}, {"args", json::array({{{"ref", 0}}})}, {"body", std::move(body)}};
    body = {{"ops", json::array({std::move(op)})}, {"outputs", {1}}};
  }
  json j = minimal();
  j["root"] = std::move(body);
  const std::string text = j.dump();
  EXPECT_NE(load_error(j).find("nesting depth 65 is over the limit depth=64"), std::string::npos);
  const Case c = parse_case_text(text, "deep.json", parse_limits("depth=256"));
  EXPECT_EQ(stats(c).max_depth, 256);
  EXPECT_NE(show(c).find("tanh"), std::string::npos);
  EXPECT_EQ(to_json(c).dump(), text);
}

// Two leaves well within the limits can make a value far over them: [65536, 1] * [1, 65536] is
// 2^32 elements (16 GiB of float32) from 512 KiB of leaves, and was allocated (or killed the
// process) before. Every value an op makes is held to leaf_elements too, its shape worked out
// by libtorch's rules before anything runs.
json two_leaves(std::vector<int64_t> a, std::vector<int64_t> b, const json& ops, int output) {
  json j = minimal();
  j["leaves"] = {{{"shape", a}, {"requires_grad", false}, {"fill", "ones"}},
                 {{"shape", b}, {"requires_grad", false}, {"fill", "ones"}}};
  j["root"] = {{"ops", ops}, {"outputs", {output}}};
  return j;
}

TEST(CaseLimits, a_value_an_op_makes_is_held_to_the_element_limit_too) {
  const json add = {{{"op", "binary"}, {"fn", "add"}, {"a", 0}, {"b", 1}}};
  EXPECT_EQ(load_error(two_leaves({4096, 1}, {1, 4096}, add, 2)), "no error");  // 2^24: the limit
  EXPECT_EQ(load_error(two_leaves({4097, 1}, {1, 4096}, add, 2)),
            "case.root.ops[0]: makes a tensor whose element count 16781312 is over the limit leaf_elements=16777216 "
            "(raise it with --limits leaf_elements=N)");
  EXPECT_EQ(load_error(two_leaves({4097, 1}, {1, 4096}, add, 2), parse_limits("leaf_elements=16781312")), "no error");
  // Inside a checkpoint body, through its arguments: an outer product.
  const json outer = {{{"op", "checkpoint"}, {"distribute", false}, {"args", {{{"ref", 0}}, {{"ref", 1}}}},
                       {"body", {{"ops", {{{"op", "matmul"}, {"a", 0}, {"b", 1}}}}, {"outputs", {2}}}}}};
  EXPECT_NE(load_error(two_leaves({65536, 1}, {1, 65536}, outer, 2))
                .find("case.root.ops[0].body.ops[0]: makes a tensor whose element count 4294967296 is over the limit"),
            std::string::npos);
  // Batched matmul broadcasts the batch sizes: [8, 1, 64, 1] @ [8, 1, 64] is [8, 8, 64, 64].
  const json batched = {{{"op", "matmul"}, {"a", 0}, {"b", 1}}};
  EXPECT_EQ(load_error(two_leaves({8, 1, 64, 1}, {8, 1, 64}, batched, 2), parse_limits("leaf_elements=262144")),
            "no error");
  EXPECT_NE(load_error(two_leaves({8, 1, 64, 1}, {8, 1, 64}, batched, 2), parse_limits("leaf_elements=262143"))
                .find("element count 262144 is over"),
            std::string::npos);
  // Batched, libtorch expands each operand to the batch sizes first: [64, 1, 1, 64] @ [1, 64, 64, 1]
  // makes [64, 64, 1, 1] (4,096 elements), on the way expanding each to 262,144.
  EXPECT_EQ(load_error(two_leaves({64, 1, 1, 64}, {1, 64, 64, 1}, batched, 2), parse_limits("leaf_elements=262144")),
            "no error");
  EXPECT_EQ(load_error(two_leaves({64, 1, 1, 64}, {1, 64, 64, 1}, batched, 2), parse_limits("leaf_elements=262143")),
            "case.root.ops[0]: expands an operand to the batch sizes, a tensor whose element count 262144 is over the "
            "limit leaf_elements=262143 (raise it with --limits leaf_elements=N)");
  // Views change the shape the next op sees: transposed, [3, 5] @ [3, 5] is [5, 5]; narrowed and
  // flattened, [6, 4] is [3, 4] and then [12], and [12] * [12, 1] is [12, 12].
  const json transposed = {{{"op", "view"}, {"fn", "transpose"}, {"x", 0}}, {{"op", "matmul"}, {"a", 2}, {"b", 1}}};
  EXPECT_NE(load_error(two_leaves({3, 5}, {3, 5}, transposed, 3), parse_limits("leaf_elements=24"))
                .find("case.root.ops[1]: makes a tensor whose element count 25 is over"),
            std::string::npos);
  const json narrowed = {{{"op", "view"}, {"fn", "narrow"}, {"x", 0}},
                         {{"op", "view"}, {"fn", "flatten"}, {"x", 2}},
                         {{"op", "binary"}, {"fn", "mul"}, {"a", 3}, {"b", 1}}};
  EXPECT_NE(load_error(two_leaves({6, 4}, {12, 1}, narrowed, 4), parse_limits("leaf_elements=143"))
                .find("case.root.ops[2]: makes a tensor whose element count 144 is over"),
            std::string::npos) << load_error(two_leaves({6, 4}, {12, 1}, narrowed, 4), parse_limits("leaf_elements=143"));
  // Shapes that do not fit together make a case whose op raises when it runs: still a case.
  EXPECT_EQ(load_error(two_leaves({3}, {4}, add, 2)), "no error");
  EXPECT_EQ(load_error(two_leaves({3, 4}, {3, 4}, batched, 2)), "no error");
  // A leaf of 65 dimensions is refused: the shapes worked out must stay small.
  json j = minimal();
  j["leaves"][0]["shape"] = std::vector<int64_t>(65, 1);
  EXPECT_EQ(load_error(j), "case.leaves[0].shape: 65 dimensions, more than 64 (a fixed bound: every value's shape is "
                           "worked out before the case runs)");
}

// value_bytes holds a case as a whole, where leaf_elements holds each tensor: one [4096, 4096]
// leaf listed a million times in the root's outputs, a 2 MB file, asked for 64 TiB of records
// and 128 TiB of loss weights. Counted at 8 bytes an element, in units of 2^27 bytes (one such
// tensor), against the default 2^34 (128 units), in one iteration: the leaf costs 9 (its
// double-precision draw, itself, its gradient, and 3 runs' records of its data and gradient),
// each root output 5 (its loss weight, the weight's copy, and 3 runs' records), each value an op
// makes 2 (itself and its gradient).
json big_leaf(int iterations) {
  json j = minimal();
  j["iterations"] = iterations;
  j["leaves"][0]["shape"] = {4096, 4096};
  j["root"] = {{"ops", json::array()}, {"outputs", json::array()}};
  return j;
}

TEST(CaseLimits, the_root_outputs_are_held_to_value_bytes_all_together) {
  json j = big_leaf(1);
  j["root"]["outputs"] = std::vector<int>(23, 0);  // 9 + 23 * 5 = 124 units, 129 with one more
  EXPECT_EQ(load_error(j), "no error");
  j["root"]["outputs"] = std::vector<int>(1000000, 0);
  const std::string text = j.dump();
  ASSERT_LT(text.size(), 3000000u);
  try {
    parse_case_text(text, "outputs.json");
    FAIL() << "no error";
  } catch (const CaseError& error) {
    EXPECT_EQ(std::string(error.what()),
              "outputs.json: case.root.outputs[23]: value bytes 17314086912 is over the limit value_bytes=17179869184 "
              "(raise it with --limits value_bytes=N)");
  }
  EXPECT_EQ(load_error(j, parse_limits("value_bytes=1125899906842624")), "no error");
}

TEST(CaseLimits, the_values_all_ops_make_are_held_to_value_bytes_bodies_included) {
  json j = big_leaf(1);
  for (int i = 0; i < 59; ++i) j["root"]["ops"].push_back({{"op", "unary"}, {"fn", "tanh"}, {"x", 0}});
  EXPECT_EQ(load_error(j), "no error");  // 9 + 59 * 2 = 127 units
  j["root"]["ops"].push_back({{"op", "checkpoint"}, {"distribute", false}, {"args", {{{"ref", 0}}}},
                              {"body", {{"ops", {{{"op", "unary"}, {"fn", "neg"}, {"x", 0}}}}, {"outputs", {1}}}}});
  EXPECT_EQ(load_error(j), "case.root.ops[59].body.ops[0]: value bytes 17314086912 is over the limit "
                           "value_bytes=17179869184 (raise it with --limits value_bytes=N)");
}

TEST(CaseLimits, the_records_of_every_iteration_count_toward_value_bytes) {
  EXPECT_EQ(load_error(big_leaf(20)), "no error");  // 3 + 2 * 3 * 20 = 123 units, 129 at 21
  EXPECT_EQ(load_error(big_leaf(21)), "case.leaves[0]: value bytes 17314086912 is over the limit "
                                      "value_bytes=17179869184 (raise it with --limits value_bytes=N)");
}

TEST(CaseLimits, a_decoded_case_is_held_to_value_bytes_too) {
  Case c = case_from_json(minimal());  // one leaf and a tanh of it: 9 + 2 units at [4096, 4096]
  c.leaves[0].shape = {4096, 4096};
  c.root.outputs.assign(23, 0);  // 11 + 23 * 5 = 126 units
  EXPECT_NO_THROW(validate(c));
  c.root.outputs.assign(24, 0);  // 131
  EXPECT_THROW(validate(c), CaseError);
}

// A size over leaf_elements is refused whatever other size is 0 (a leaf of no elements: the
// order of the sizes decided before), and the loader refuses a shape too long before it reads
// its sizes.
TEST(CaseLimits, a_leaf_size_over_the_limit_is_refused_whatever_the_other_sizes) {
  json j = minimal();
  const int64_t huge = int64_t{1} << 40;
  j["leaves"][0]["shape"] = {0, huge, huge};
  EXPECT_EQ(load_error(j), "case.leaves[0].shape: size 1099511627776 is over the limit leaf_elements=16777216 "
                           "(raise it with --limits leaf_elements=N)");
  j["leaves"][0]["shape"] = {0, 4096};
  j["root"]["outputs"] = json::array();
  EXPECT_EQ(load_error(j), "no error");
  j["leaves"][0]["shape"] = std::vector<std::string>(100, "x");
  EXPECT_EQ(load_error(j), "case.leaves[0].shape: 100 dimensions, more than 64 (a fixed bound: every value's shape "
                           "is worked out before the case runs)");
}

// The shapes validation works out are libtorch's: for random shapes (ranks 0 to 4, sizes 0 to
// 3) of add, matmul and the views, an op libtorch refuses leaves the case valid, and for every
// other the element count is libtorch's. A third leaf [1000, 1, 1, 1, 1] multiplies the result,
// so that a count of 2 or more shows as over the limit, and an op whose shape validation could
// not work out (it would let anything after it through) fails the test too.
TEST(CaseLimits, the_shapes_worked_out_are_the_ones_libtorch_makes) {
  skip_libtorch_backtraces();  // a thousand refusals, each otherwise a stack walk
  std::mt19937 random(20261130);
  auto draw_shape = [&] {
    std::vector<int64_t> shape(random() % 5);
    for (int64_t& d : shape) d = static_cast<int64_t>(random() % 4);
    return shape;
  };
  constexpr int64_t kAmplifier = 1000;
  // Values: v0 and v1 the drawn leaves, v2 the amplifier, then the ops'.
  const json ops[] = {
      {{{"op", "binary"}, {"fn", "add"}, {"a", 0}, {"b", 1}}},
      {{{"op", "matmul"}, {"a", 0}, {"b", 1}}},
      {{{"op", "view"}, {"fn", "transpose"}, {"x", 0}}, {{"op", "matmul"}, {"a", 3}, {"b", 1}}},
      {{{"op", "view"}, {"fn", "narrow"}, {"x", 0}}, {{"op", "binary"}, {"fn", "mul"}, {"a", 3}, {"b", 1}}},
      {{{"op", "view"}, {"fn", "flatten"}, {"x", 0}}, {{"op", "matmul"}, {"a", 1}, {"b", 3}}},
  };
  int amplified_over = 0;
  int refused_by_torch = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::vector<int64_t> a = draw_shape();
    const std::vector<int64_t> b = draw_shape();
    const int which = static_cast<int>(random() % std::size(ops));
    const at::Tensor x = at::ones(a);
    const at::Tensor y = at::ones(b);
    // The operands of a matmul, for the copies its batched path makes (see matmul_dims).
    std::optional<std::pair<at::Tensor, at::Tensor>> matmul;
    std::optional<int64_t> made;
    try {
      switch (which) {
        case 0: made = at::add(x, y).numel(); break;
        case 1: matmul.emplace(x, y); break;
        case 2: matmul.emplace(x.dim() >= 2 ? x.transpose(-2, -1) : x, y); break;
        case 3: made = at::mul(x.dim() >= 1 ? x.narrow(0, 0, std::max<int64_t>(1, x.size(0) / 2)) : x, y).numel(); break;
        case 4: matmul.emplace(y, x.reshape({-1})); break;
      }
      if (matmul) made = at::matmul(matmul->first, matmul->second).numel();
    } catch (const c10::Error&) {
      ++refused_by_torch;
    }
    int64_t floor = std::max({x.numel(), y.numel(), kAmplifier});
    if (made && matmul && (matmul->first.dim() >= 3 || matmul->second.dim() >= 3)) {
      const auto& [p, q] = *matmul;
      const auto batch_of = [](const at::Tensor& t) {
        const auto sizes = t.sizes().vec();
        return std::vector<int64_t>(sizes.begin(), sizes.end() - std::min<int64_t>(2, t.dim()));
      };
      int64_t batch = 1;
      for (int64_t d : at::infer_size(batch_of(p), batch_of(q))) batch *= d;
      const int64_t n = p.dim() >= 2 ? p.size(-2) : 1;
      const int64_t m = q.dim() >= 2 ? q.size(-1) : 1;
      floor = std::max({floor, batch * n * p.size(-1), batch * p.size(-1) * m});
    }
    json j = minimal();
    j["leaves"] = {{{"shape", a}, {"requires_grad", false}, {"fill", "ones"}},
                   {{"shape", b}, {"requires_grad", false}, {"fill", "ones"}},
                   {{"shape", {kAmplifier, 1, 1, 1, 1}}, {"requires_grad", false}, {"fill", "ones"}}};
    json case_ops = ops[which];
    const int last = 2 + static_cast<int>(case_ops.size());
    case_ops.push_back({{"op", "binary"}, {"fn", "mul"}, {"a", last}, {"b", 2}});
    j["root"] = {{"ops", case_ops}, {"outputs", {last + 1}}};
    const std::string what = "op " + std::to_string(which) + " on " + json(a).dump() + ", " + json(b).dump();
    const std::string at_floor = load_error(j, parse_limits("leaf_elements=" + std::to_string(floor)));
    if (!made || kAmplifier * *made <= floor) {
      EXPECT_EQ(at_floor, "no error") << what;
      continue;
    }
    const int64_t amplified = kAmplifier * *made;
    EXPECT_EQ(at_floor, "case.root.ops[" + std::to_string(case_ops.size() - 1) + "]: makes a tensor whose element count " +
                            std::to_string(amplified) + " is over the limit leaf_elements=" + std::to_string(floor) +
                            " (raise it with --limits leaf_elements=N)")
        << what;
    EXPECT_EQ(load_error(j, parse_limits("leaf_elements=" + std::to_string(amplified))), "no error") << what;
    ++amplified_over;
  }
  EXPECT_GT(amplified_over, 300);  // enough values of 2 elements or more to mean something
  EXPECT_GT(refused_by_torch, 300);
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
