// The fuzzing side: the byte decoder (total, deterministic, stable), the structural reducer,
// the extra counters, and the targets, minimize and replay as a campaign uses them.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "fuzz/feedback.h"
#include "properties/generator.h"
#include "properties/reduce.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

std::string random_bytes(std::mt19937_64& random, std::size_t size) {
  std::string bytes(size, '\0');
  for (char& b : bytes) b = static_cast<char>(random() & 0xff);
  return bytes;
}

Case decode(const std::string& bytes) {
  return decode_case(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::set<std::string> op_kinds(const Case& c) {
  std::set<std::string> kinds;
  std::function<void(const Segment&)> walk = [&](const Segment& segment) {
    for (const Op& op : segment.ops) {
      kinds.insert(op_name(op));
      if (const Segment* body = op_body(op)) walk(*body);
    }
  };
  walk(c.root);
  return kinds;
}

TEST(Decoder, every_byte_string_decodes_to_a_valid_case_that_survives_json) {
  std::mt19937_64 random(20261129);
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = random_bytes(random, random() % 600);
    const Case c = decode(bytes);
    ASSERT_NO_THROW(validate(c)) << "input " << i;
    const nlohmann::json j = to_json(c);
    EXPECT_EQ(to_json(case_from_json(nlohmann::json::parse(j.dump()))), j) << "input " << i;
  }
  EXPECT_NO_THROW(validate(decode("")));  // out of bytes from the start: every choice its first
}

TEST(Decoder, is_deterministic) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 200; ++i) {
    const std::string bytes = random_bytes(random, 1 + random() % 300);
    EXPECT_EQ(to_json(decode(bytes)), to_json(decode(bytes)));
  }
}

// FuzzedDataProvider reads choices from the end of the input: a byte changed away from the end
// leaves the first choices (seed, dtype, iterations, leaves) as they were, so a mutation changes
// part of a case rather than all of it.
TEST(Decoder, is_stable_under_a_one_byte_change) {
  std::mt19937_64 random(11);
  int cases_changed = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = random_bytes(random, 96);
    const Case before = decode(bytes);
    bytes[random() % 64] ^= static_cast<char>(1 + random() % 255);
    const Case after = decode(bytes);
    EXPECT_EQ(after.seed, before.seed);
    EXPECT_EQ(after.dtype, before.dtype);
    EXPECT_EQ(after.iterations, before.iterations);
    EXPECT_EQ(to_json(after)["leaves"], to_json(before)["leaves"]);
    cases_changed += to_json(after) != to_json(before);
  }
  // ...and the change does reach the case often: the bytes are not ignored.
  EXPECT_GT(cases_changed, 30);
}

TEST(Decoder, committed_seed_corpus_reaches_every_op_and_argument_kind) {
  std::set<std::string> kinds;
  std::set<std::string> features;
  const std::string dir = std::string(test_paths::source_dir()) + "/corpus/fuzz-check";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Case c = decode(bytes);
    for (const std::string& k : op_kinds(c)) kinds.insert(k);
    for (const std::string& f : case_features(c)) features.insert(f);
  }
  for (const char* kind : {"unary", "binary", "matmul", "view", "inplace", "reduce", "argmax", "random", "stash",
                           "raise", "checkpoint", "fork"}) {
    EXPECT_TRUE(kinds.count(kind)) << "no seed holds op " << kind << " (rerun recheck fuzz-seeds)";
  }
  for (const char* arg : {"arg: tensor requiring grad", "arg: tensor not requiring grad", "arg: integer tensor",
                          "arg: bool tensor", "arg: view", "arg: the same value twice", "arg: None", "arg: int",
                          "arg: float", "arg: bool", "arg: str", "arg: non-leaf"}) {
    EXPECT_TRUE(features.count(arg)) << "no seed passes " << arg;
  }
}

TEST(Feedback, counters_tell_cases_apart_and_grow_with_structure) {
  const uint8_t byte = 0;
  const Case flat = decode_case(&byte, 0);
  Case nested = flat;
  Checkpoint outer;
  outer.args = {Ref{0}, None{}, int64_t{3}};
  outer.body->ops.push_back(Unary{Unary::Fn::tanh, 0});
  outer.body->outputs = {3};
  nested.root.ops.push_back(outer);
  nested.root.outputs = {static_cast<int>(nested.leaves.size()) + 1};
  validate(nested);
  std::array<uint8_t, fuzz::kCounterCount> first{};
  fuzz::clear_counters();
  fuzz::record_case(flat);
  std::copy(fuzz::counters(), fuzz::counters() + fuzz::kCounterCount, first.begin());
  const std::size_t flat_set = fuzz::counters_set();
  fuzz::clear_counters();
  fuzz::record_case(nested);
  EXPECT_GT(fuzz::counters_set(), flat_set + 3);  // a checkpoint, its depth, its three argument kinds
  bool differs = false;
  for (std::size_t i = 0; i < fuzz::kCounterCount; ++i) differs |= first[i] != fuzz::counters()[i];
  EXPECT_TRUE(differs);
}

TEST(Reduce, inlining_a_checkpoint_keeps_the_values_that_follow_it) {
  // checkpoint(v0){ tanh } then add(v1, v0): inlined, add must read tanh's value.
  Case c;
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, true, Fill::randn});
  Checkpoint ck;
  ck.args = {Ref{0}};
  ck.body->ops.push_back(Unary{Unary::Fn::tanh, 0});
  ck.body->outputs = {1};
  c.root.ops.push_back(ck);
  c.root.ops.push_back(Binary{Binary::Fn::add, 1, 0});
  c.root.outputs = {2};
  validate(c);
  int calls = 0;
  const Case flat = reduce_case(c, [&](const Case& candidate) {
    ++calls;
    // Keep only candidates without a checkpoint that still add tanh(v0) to v0.
    return candidate.root.ops.size() == 2 && std::holds_alternative<Unary>(candidate.root.ops[0]) &&
           std::holds_alternative<Binary>(candidate.root.ops[1]) && std::get<Binary>(candidate.root.ops[1]).a == 1 &&
           std::get<Binary>(candidate.root.ops[1]).b == 0;
  });
  EXPECT_GT(calls, 0);
  ASSERT_EQ(flat.root.ops.size(), 2u) << show(flat);
  EXPECT_TRUE(std::holds_alternative<Unary>(flat.root.ops[0])) << show(flat);
  EXPECT_EQ(flat.root.outputs, std::vector<int>{2});
}

// A capture names a root leaf from any depth: dropping a leaf before it renumbers it, and the leaf
// it captures is not dropped while a capture still reads it.
TEST(Reduce, dropping_a_leaf_renumbers_the_captures_in_bodies) {
  Case c;
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, false, Fill::randn});
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, true, Fill::randn});
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, true, Fill::randn});
  Checkpoint ck;
  ck.args = {Ref{2}};
  ck.body->ops = {Capture{1}, Matmul{0, 1}};
  ck.body->outputs = {2};
  c.root.ops = {ck};
  c.root.outputs = {3};
  validate(c);
  const Case reduced = reduce_case(c, [](const Case& candidate) {
    // Fails while some checkpoint's body still captures a leaf of shape [2, 2] that requires grad.
    bool captures = false;
    any_op(candidate.root, [&](const Op& op) {
      if (const auto* ck = std::get_if<Checkpoint>(&op)) {
        for (const Op& inner : ck->body->ops) {
          const auto* capture = std::get_if<Capture>(&inner);
          captures = captures || (capture != nullptr && candidate.leaves.at(static_cast<size_t>(capture->leaf)).requires_grad);
        }
      }
      return false;
    });
    return captures;
  });
  validate(reduced);
  ASSERT_LT(reduced.leaves.size(), c.leaves.size()) << show(reduced);
  bool found = false;
  any_op(reduced.root, [&](const Op& op) {
    if (const auto* capture = std::get_if<Capture>(&op)) {
      found = true;
      EXPECT_TRUE(reduced.leaves.at(static_cast<size_t>(capture->leaf)).requires_grad) << show(reduced);
    }
    return false;
  });
  EXPECT_TRUE(found) << show(reduced);
}

// Inlining a checkpoint whose body is one checkpoint, with two more after it: the segment's ops
// lose one and get one back in the middle, within its capacity, so std::vector moves the ops
// after it along and copy-assigns the new one into the checkpoint it moved from. A Box moved
// from held nothing and the copy wrote through null: the minimization after a million-case run
// died there (SIGSEGV), with the run's report unwritten.
TEST(Reduce, inlining_a_checkpoint_into_one_moved_along_copies_it_whole) {
  Case c;
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, true, Fill::randn});
  Checkpoint inner;
  inner.args = {Ref{0}};
  inner.body->ops.push_back(Unary{Unary::Fn::tanh, 0});
  inner.body->outputs = {1};
  Checkpoint outer;
  outer.args = {Ref{0}};
  outer.body->ops = {inner};
  outer.body->outputs = {1};
  c.root.ops = {outer, inner, inner};
  c.root.outputs = {3};
  validate(c);
  const Case flat = reduce_case(c, [&](const Case& candidate) {
    // Keep the candidate with the outer checkpoint inlined: three checkpoints of one op each.
    return candidate.root.ops.size() == 3 && std::all_of(candidate.root.ops.begin(), candidate.root.ops.end(), [](const Op& op) {
             return std::holds_alternative<Checkpoint>(op) && std::get<Checkpoint>(op).body->ops.size() == 1;
           });
  });
  ASSERT_EQ(flat.root.ops.size(), 3u) << show(flat);
  for (const Op& op : flat.root.ops) EXPECT_EQ(std::get<Checkpoint>(op).body->ops.size(), 1u) << show(flat);
  validate(flat);
}

// Ctrl-C during `recheck minimize` asks the reducer to stop: it must end at once with the case
// kept so far, not go on building and validating every remaining candidate (quadratic in a
// large case), and not offer the predicate any of them.
TEST(Reduce, stops_at_once_when_asked_and_keeps_the_smallest_case_so_far) {
  Case c;
  c.leaves.push_back(Leaf{{2, 2}, std::nullopt, true, Fill::randn});
  constexpr int kChain = 200;
  for (int i = 0; i < kChain; ++i) c.root.ops.push_back(Unary{i % 2 ? Unary::Fn::tanh : Unary::Fn::neg, i});
  c.root.outputs = {kChain};
  validate(c);
  int offered = 0;
  int asked = 0;
  bool stop = false;
  ReduceStats stats;
  const Case smallest = reduce_case(
      c,
      [&](const Case&) {
        // The first candidate is kept; the interrupt comes during the fifth.
        if (++offered == 5) stop = true;
        return offered == 1;
      },
      &stats, [&] {
        ++asked;
        return stop;
      });
  EXPECT_EQ(offered, 5);
  EXPECT_EQ(stats.candidates, 5);
  EXPECT_EQ(stats.accepted, 1);
  EXPECT_EQ(smallest.root.ops.size(), static_cast<std::size_t>(kChain - 1)) << show(smallest);
  EXPECT_NO_THROW(validate(smallest));
  EXPECT_LE(asked, 10) << "the reducer went on asking after it was told to stop";
}

// ---- the targets and the commands, as a campaign runs them ---------------------------------

using test_shell::Result;
using test_shell::run_shell;

std::string fresh_dir(const std::string& name) { return test_shell::fresh_folder(::testing::TempDir() + "/" + name); }

const std::string kRecheck = test_paths::recheck_binary();

TEST(Replay, the_corpus_holds_every_expectation_it_records) {
  const Result r = run_shell(kRecheck + " replay " + std::string(test_paths::source_dir()) + "/corpus");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 0 do not"), std::string::npos) << r.output;
  // The files replayed in three worker processes: the same lines in the same order.
  const Result jobs = run_shell(kRecheck + " replay " + std::string(test_paths::source_dir()) + "/corpus --jobs 3");
  EXPECT_EQ(jobs.exit_code, 0) << jobs.output;
  EXPECT_EQ(jobs.output, r.output);
}

TEST(Replay, a_wrong_expectation_fails_and_says_what_was_seen) {
  const std::string dir = fresh_dir("replay-wrong");
  Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/seeds/nested-three-deep.json");
  c.expect = {Expectation{"clearing", "rng-restored", "regression"}};
  save_case_file(c, dir + "/wrong.json");
  const Result r = run_shell(kRecheck + " replay " + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("got pass"), std::string::npos) << r.output;
  c.expect = {Expectation{"clearing", "no-such-property", "pass"}};
  save_case_file(c, dir + "/wrong.json");
  const Result bad = run_shell(kRecheck + " replay " + dir);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("case.expect[0].property"), std::string::npos) << bad.output;
}

TEST(Minimize, a_case_without_alarm_is_refused_with_a_reason) {
  const Result r = run_shell(kRecheck + " minimize " + std::string(test_paths::source_dir()) +
                             "/corpus/seeds/nested-three-deep.json --out " + ::testing::TempDir() + "/nothing.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing to minimize"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(::testing::TempDir() + "/nothing.json"));
}

}  // namespace
}  // namespace recheck
