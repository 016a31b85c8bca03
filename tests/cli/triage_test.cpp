// Triage: cause signatures (properties/causes.h) and buckets (properties/buckets.h), and `recheck
// run`'s bucket list, its minimized case per bucket and its comparison with a previous report.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/op_trace.h"
#include "oracles/eager.h"
#include "properties/buckets.h"
#include "properties/causes.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace {

using namespace recheck;
using nlohmann::json;
using test_shell::Result;

Result run(const std::string& args) { return test_shell::run_shell(std::string(test_paths::recheck_binary()) + " " + args); }

const std::string kRegressions = std::string(test_paths::source_dir()) + "/corpus/regressions/";

// The cause of `property` on a corpus case, the clearing change against the oracle.
std::string cause_of(const std::string& file, const std::string& property) {
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  const CaseResult result = check_case(load_case_file(kRegressions + file), *oracle, *sut);
  for (const PropertyResult& r : result.results) {
    if (r.property == property) return r.cause;
  }
  return "(no verdict)";
}

TEST(Triage, fingerprints_read_a_view_as_its_elements_and_see_every_change_to_a_value) {
  const at::Tensor t = at::arange(24, at::kDouble).reshape({4, 6});
  const at::Tensor transposed = t.t();
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(fingerprint({transposed}), fingerprint({transposed.contiguous()}));
  EXPECT_NE(fingerprint({transposed}), fingerprint({t}));  // the same bytes, another shape
  EXPECT_NE(fingerprint({t.slice(1, 0, 6, 2)}), fingerprint({t.slice(1, 1, 6, 2)}));
  EXPECT_NE(fingerprint({t}), fingerprint({t.to(at::kFloat)}));
  EXPECT_NE(fingerprint({Value{int64_t{1}}}), fingerprint({Value{1.0}}));

  // A value read again by its segment's prints: the same print while it is unchanged, and a new
  // one after an in-place op, distribute's `.data`, or a view swapped in at the same address.
  at::Tensor x = at::arange(12, at::kDouble).reshape({3, 4});
  const std::vector<Value> values{x, Value{int64_t{3}}};
  ValuePrints prints;
  const uint64_t first = prints.of(values, {0, 1});
  EXPECT_EQ(first, fingerprint(values));
  EXPECT_EQ(prints.of(values, {0, 1}), first);
  x.add_(1);
  EXPECT_NE(prints.of(values, {0, 1}), first);
  EXPECT_EQ(prints.of(values, {0, 1}), fingerprint(values));
  x.set_data(at::zeros({3, 4}, at::kDouble));
  EXPECT_EQ(prints.of(values, {0, 1}), fingerprint(values));
  x.set_data(x.detach().view({-1}).slice(0, 0, 6));
  EXPECT_EQ(prints.of(values, {0, 1}), fingerprint(values));
  EXPECT_EQ(prints.of_from(values, 0), fingerprint(values));
  EXPECT_EQ(prints.of_outputs({x}, {0}), fingerprint({x}));
}

TEST(Triage, abstract_text_keeps_the_words_and_drops_the_case_s_particulars) {
  EXPECT_EQ(abstract_text("iteration 1, leaf v12 .grad: element 3: -1.5e-07 vs 2.25 (8616 ulp)"),
            "iteration #, leaf v# .grad: element #: # vs # (# ulp)");
  EXPECT_EQ(abstract_text("mat1 and mat2 shapes cannot be multiplied (1x9 and 10x1)"),
            "mat1 and mat2 shapes cannot be multiplied (#x# and #x#)");
  EXPECT_EQ(abstract_text("got [24] but expected shape compatible with [4, 6] in AddBackward0"),
            "got […] but expected shape compatible with […] in AddBackward0");
  EXPECT_EQ(abstract_text("root.ops[4].body.ops[0] at iteration 0: read False before root.ops[4].body.ops[0].body.ops[1]"),
            "@ at iteration #: read False before @");
  EXPECT_EQ(abstract_text("'NoneType' object has no attribute 'data'"), "'<non-tensor>' object has no attribute 'data'");
  EXPECT_EQ(abstract_text("argument 1 is of type str"), "argument # is of type <non-tensor>");
  EXPECT_EQ(abstract_text("differs: CPU generator, tracker state 'a-rng', tracker state 'b-rng'"),
            "differs: CPU generator, tracker state");
  // A word that only looks like a literal's type is a word.
  EXPECT_EQ(abstract_text("int8 and the str method"), "int8 and the str method");
}

// Two different causes of one property are two signatures; the minimized case and a larger one
// of one cause are one.
TEST(Triage, signatures_tell_causes_apart_and_not_cases) {
  const std::string after_error = cause_of("flag-left-set-after-an-error-in-forward.json", "no-side-effects");
  const std::string distribute = cause_of("pre-existing-no-side-effects.json", "no-side-effects");
  EXPECT_NE(after_error, distribute);
  EXPECT_NE(after_error.find("is-checkpointing flag left set @ after an error in forward"), std::string::npos) << after_error;
  EXPECT_NE(distribute.find("checkpoint (distribute)"), std::string::npos) << distribute;
  const std::string nested = cause_of("flag-unset-by-a-nested-checkpoint.json", "flag-in-body");
  EXPECT_EQ(nested, "flag-in-body pre-existing: forward: is_checkpointing() read False in a checkpoint's body @ a "
                    "checkpoint ran in the body before the reading");
  const std::string autocast = cause_of("autocast-not-recorded-recomputes-in-float32.json", "recompute-fidelity");
  EXPECT_NE(autocast.find("autocast"), std::string::npos) << autocast;

  // Every flag-in-body finding of a hundred drawn cases of every size has that one signature.
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  int seen = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const CaseResult result = check_case(draw_case(GenOptions{}, seed), *oracle, *sut);
    for (const PropertyResult& r : result.results) {
      if (r.property != "flag-in-body" || r.classification == Classification::pass) continue;
      ++seen;
      EXPECT_EQ(r.cause, nested) << "draw seed " << seed;
    }
  }
  EXPECT_GT(seen, 10);
}

// A verdict about iteration i is located in iterations 0..i, and the forward search stops at
// the iteration where the run's and eager mode's errors part: what comes after follows from it.
TEST(Triage, a_verdict_is_located_in_its_own_iteration_or_where_the_errors_part) {
  const std::string raised = cause_of("error-located-in-the-iteration-that-raised-it.json", "errors-match");
  EXPECT_EQ(raised,
            "errors-match pre-existing: error: AttributeError in iteration # forward: '<non-tensor>' object has no "
            "attribute 'data' | eager: no error @ raised by checkpoint (distribute) in forward");
  const std::string updated_twice = cause_of("buffer-updated-twice-located-in-its-own-iteration.json", "no-side-effects");
  EXPECT_EQ(updated_twice,
            "no-side-effects pre-existing: iteration #, leaf v# data @ a recomputation parts from its forward at the "
            "arguments a checkpoint's body got");
}

// Values that agree can reach the loss otherwise: where no value parts, the run is located at the
// first op outside every checkpoint's body whose output requires grad otherwise than eager mode's,
// the way the symptom points (a gradient the run lacks: an output that does not require grad).
TEST(Triage, where_no_value_parts_a_finding_is_located_where_requires_grad_parts) {
  EXPECT_EQ(cause_of("captured-parameter-without-grad.json", "grads-match-eager"),
            "grads-match-eager pre-existing: iteration #, leaf v# .grad: defined None vs a tensor @ forward parts from "
            "eager's in requires_grad at the return of checkpoint: an output does not require grad where eager's does");
  EXPECT_EQ(cause_of("nongrad-output-requires-grad.json", "outputs-bitwise"),
            "outputs-bitwise pre-existing: iteration #, loss: defined a tensor vs None @ forward parts from eager's in "
            "requires_grad at the return of checkpoint: an output requires grad where eager's does not");
  EXPECT_EQ(known_cause_of(cause_of("captured-parameter-without-grad.json", "grads-match-eager")), "captured-parameter-without-grad");
  EXPECT_EQ(known_cause_of(cause_of("nongrad-output-requires-grad.json", "outputs-bitwise")), "nongrad-output-requires-grad");
}

// An op's prints as it returned: an in-place op's show what it changed; a pure op's are those it
// began with, not read again.
TEST(Triage, the_trace_sees_an_in_place_op_change_what_it_read) {
  const Case c = case_from_json(json::parse(R"({"format": "recheck-case", "version": 1, "seed": 1, "device": "cpu", "dtype": "float32",
    "iterations": 1, "leaves": [{"fill": "randn", "requires_grad": true, "shape": [3, 2]}],
    "root": {"ops": [{"op": "unary", "fn": "tanh", "x": 0}, {"op": "inplace", "fn": "mul", "scalar": 0.5, "x": 1},
                     {"op": "unary", "fn": "tanh", "x": 2}], "outputs": [3]}})"));
  EagerExecution eager;
  RunOptions traced;
  traced.trace_index = std::make_shared<const TraceIndex>(c);
  const Observations observed = run_case(c, eager, traced);
  ASSERT_EQ(observed.trace.size(), 3u);
  for (const OpExecution& e : observed.trace) {
    if (e.op == 1) {
      EXPECT_NE(e.inputs_after, e.inputs) << "the in-place op";
    } else {
      EXPECT_EQ(e.inputs_after, e.inputs) << "op " << e.op;
    }
  }
  // The op after it reads the value as the in-place op left it.
  EXPECT_EQ(observed.trace[2].inputs, observed.trace[1].inputs_after);
}

// The oracle runs without a trace and again with one where a verdict reads it (the sut holds,
// the oracle fails): a fix's findings are located as a check that traced every run locates them.
TEST(Triage, a_fix_s_findings_are_located_from_the_oracle_s_trace_recorded_again) {
  auto oracle = make_checkpoint("skip-forward-rng");
  auto sut = make_checkpoint("clearing");
  EagerExecution eager;
  int located = 0;
  // At least 60 cases, and on until a finding of the fix was located (up to 300).
  for (uint64_t seed = 1; seed <= 60 || (located == 0 && seed <= 300); ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    const CaseResult result = check_case(c, *oracle, *sut);
    RunOptions traced;
    traced.trace_index = std::make_shared<const TraceIndex>(c);
    const Observations eager_observed = run_case(c, eager, traced);
    const Observations oracle_observed = run_case(c, *oracle, traced);
    const Observations sut_observed = run_case(c, *sut, traced);
    ASSERT_FALSE(oracle_observed.trace.empty());
    for (const PropertyResult& r : result.results) {
      if (r.classification == Classification::pass) continue;
      EXPECT_EQ(r.cause, cause_signature(r, c, &eager_observed, oracle_observed, sut_observed)) << "draw seed " << seed;
      if (r.sut.holds && r.cause.find(" @ a recomputation parts from its forward at ") != std::string::npos) ++located;
    }
  }
  EXPECT_GT(located, 0);
}

TEST(Triage, buckets_count_merge_compare_and_read_back) {
  Buckets a;
  a.add("p pre-existing: x", "p", "pre-existing", false, 3, 13, "sut: x");
  a.add("p pre-existing: x", "p", "pre-existing", false, 9, 19, "sut: x again");
  a.add("q regression: y", "q", "regression", true, 5, 15, "sut: y");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a.ordered().front()->signature, "q regression: y");  // alarms first
  EXPECT_EQ(a.at("p pre-existing: x").count, 2);
  EXPECT_EQ(a.at("p pre-existing: x").first_case, 3);

  Buckets b;
  b.add("p pre-existing: x", "p", "pre-existing", false, 0, 100, "sut: x");
  b.add("r pre-existing: z", "r", "pre-existing", false, 1, 101, "sut: z");
  Buckets merged = a;
  merged.merge(b);
  EXPECT_EQ(merged.at("p pre-existing: x").count, 3);
  EXPECT_EQ(merged.at("p pre-existing: x").draw_seed, 13u);  // the first kept
  EXPECT_EQ(merged.size(), 3u);

  a.compare_with(b);
  EXPECT_EQ(a.at("p pre-existing: x").status, "still");
  EXPECT_EQ(a.at("q regression: y").status, "new");
  EXPECT_EQ(a.at("r pre-existing: z").status, "gone");
  EXPECT_EQ(a.at("r pre-existing: z").count, 0);
  EXPECT_NE(a.describe().find("1 new, 1 still present, 1 gone"), std::string::npos) << a.describe();

  const Buckets back = Buckets::from_json(a.to_json());
  EXPECT_EQ(back.to_json(), a.to_json());
  json broken = a.to_json();
  broken[1].erase("count");
  try {
    (void)Buckets::from_json(broken);
    ADD_FAILURE() << "a bucket without a count was read";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("buckets[1]"), std::string::npos) << error.what();
  }
}

TEST(Triage, a_previous_report_that_is_not_one_is_refused_in_one_line) {
  const std::string dir = ::testing::TempDir() + "/triage-bad";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/half.json") << "{\"tool\": \"recheck\", \"buckets\": [";
  std::ofstream(dir + "/other.json") << "{\"tool\": \"recheck\"}";
  for (const auto& [file, says] : std::map<std::string, std::string>{{"half.json", "not a JSON report"},
                                                                      {"other.json", "no \"buckets\""},
                                                                      {"missing.json", "cannot be read"}}) {
    const Result r = run("run --cases 1 --quiet --out " + dir + "/out --previous " + dir + "/" + file);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out")) << "nothing runs before the report is read";
  }
}

}  // namespace

TEST(Triage, triage_refuses_a_path_that_is_not_there_or_a_folder_with_nothing_to_triage_in_one_line) {
  const std::string dir = ::testing::TempDir() + "/triage-nothing";
  std::filesystem::create_directories(dir + "/empty");
  std::ofstream(dir + "/empty/notes.txt") << "not an input";
  for (const auto& [path, says] : std::map<std::string, std::string>{
           {dir + "/missing", "no such file or folder"}, {dir + "/empty", "holds no crash file"}}) {
    const Result r = run("triage " + path + " --out " + dir + "/out");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out"));
  }
}
