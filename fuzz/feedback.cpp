#include "fuzz/feedback.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <variant>

#include "core/analysis.h"
#include "core/case_detail.h"
#include "properties/generator.h"

// libFuzzer finds this section through the linker's __start_/__stop_ symbols; `used` keeps it
// when nothing else reads it. GCC and clang both honour the attributes.
extern "C" {
__attribute__((section("__libfuzzer_extra_counters"), used))
uint8_t recheck_extra_counters[recheck::fuzz::kCounterCount];
}

namespace recheck::fuzz {

namespace {

// The counter space, region by region; each region is a fixed block so that a feature keeps
// its counter from one input to the next.
constexpr std::size_t kOpKinds = std::variant_size_v<Op>;
constexpr std::size_t kDepths = 8;
constexpr std::size_t kArgKinds = 10;
constexpr std::size_t kArgPositions = 8;

constexpr std::size_t kOpByDepth = 0;                                   // kind x depth
constexpr std::size_t kOpPairs = kOpByDepth + kOpKinds * kDepths;       // kind x kind
constexpr std::size_t kMaxDepth = kOpPairs + kOpKinds * kOpKinds;       // 0..15
constexpr std::size_t kArgs = kMaxDepth + 16;                           // kind x position
constexpr std::size_t kRng = kArgs + kArgKinds * kArgPositions;         // source x context x fn
constexpr std::size_t kRandomFnCount = std::size(case_detail::kRandomFns);
constexpr std::size_t kDtypes = kRng + 3 * 3 * kRandomFnCount;          // case dtype, leaf dtypes
constexpr std::size_t kShapes = kDtypes + 10;                           // leaf dims 1..8
constexpr std::size_t kVerdicts = kShapes + 16;                         // property x class
constexpr std::size_t kLabels = kVerdicts + 16 * 5;                     // hashed corner labels
constexpr std::size_t kLabelSlots = kCounterCount - kLabels;
static_assert(kLabels + 256 <= kCounterCount, "too few counters for the corner labels");

void bump(std::size_t index) {
  uint8_t& c = recheck_extra_counters[index % kCounterCount];
  if (c != 255) ++c;
}

std::size_t clamp(std::size_t v, std::size_t n) { return v < n ? v : n - 1; }

enum ArgKind : std::size_t { kTensorGrad, kTensorNoGrad, kIntTensor, kViewArg, kRepeated, kNone, kInt, kDouble, kBool, kString };

// Bumps the counters of what `segment` holds; gives the facts of its outputs (core/analysis.h).
// `leaves`: the case's, which a capture reads at any depth.
std::vector<ValueFacts> walk(const Segment& segment, std::vector<ValueFacts> values, const std::vector<ValueFacts>& leaves,
                             std::size_t depth, bool in_checkpoint, bool in_fork) {
  std::size_t previous = kOpKinds;  // none yet
  for (const Op& op : segment.ops) {
    const std::size_t kind = op.index();
    bump(kOpByDepth + kind * kDepths + clamp(depth, kDepths));
    if (previous != kOpKinds) bump(kOpPairs + previous * kOpKinds + kind);
    previous = kind;
    if (const auto* r = std::get_if<Random>(&op)) {
      const std::size_t context = in_fork ? 2 : in_checkpoint ? 1 : 0;
      bump(kRng + (static_cast<std::size_t>(r->source) * 3 + context) * kRandomFnCount + static_cast<std::size_t>(r->fn));
    }
    std::vector<ValueFacts> body_inputs;
    std::vector<ValueFacts> outputs;
    if (const auto* ck = std::get_if<Checkpoint>(&op)) {
      std::vector<int> seen;
      for (std::size_t i = 0; i < ck->args.size(); ++i) {
        const Arg& arg = ck->args[i];
        std::size_t arg_kind = kNone;
        const ValueFacts f = arg_facts(arg, values);
        if (const auto* ref = std::get_if<Ref>(&arg)) {
          arg_kind = f.kind != ValueFacts::Kind::tensor ? kNone
                     : f.view                           ? kViewArg
                     : !f.floating()                    ? kIntTensor
                     : f.requires_grad                  ? kTensorGrad
                                                        : kTensorNoGrad;
          for (int s : seen) {
            if (s == ref->value) arg_kind = kRepeated;
          }
          seen.push_back(ref->value);
        } else if (std::holds_alternative<int64_t>(arg)) {
          arg_kind = kInt;
        } else if (std::holds_alternative<double>(arg)) {
          arg_kind = kDouble;
        } else if (std::holds_alternative<bool>(arg)) {
          arg_kind = kBool;
        } else if (std::holds_alternative<std::string>(arg)) {
          arg_kind = kString;
        }
        bump(kArgs + arg_kind * kArgPositions + clamp(i, kArgPositions));
        body_inputs.push_back(as_body_input(f));
      }
      outputs = checkpoint_output_facts(body_inputs, walk(*ck->body, body_inputs, leaves, depth + 1, true, in_fork));
    } else if (const auto* fork = std::get_if<Fork>(&op)) {
      for (int a : fork->args) body_inputs.push_back(as_body_input(arg_facts(Ref{a}, values)));
      outputs = walk(*fork->body, body_inputs, leaves, depth, in_checkpoint, true);
    } else if (const auto* autocast = std::get_if<Autocast>(&op)) {
      for (int a : autocast->args) body_inputs.push_back(as_body_input(arg_facts(Ref{a}, values)));
      outputs = walk(*autocast->body, body_inputs, leaves, depth, in_checkpoint, in_fork);
    } else {
      outputs = plain_op_facts(op, values, leaves);
    }
    values.insert(values.end(), outputs.begin(), outputs.end());
  }
  std::vector<ValueFacts> outputs;
  for (int ref : segment.outputs) outputs.push_back(arg_facts(Ref{ref}, values));
  return outputs;
}

int max_checkpoint_depth(const Segment& segment) {
  int deepest = 0;
  for (const Op& op : segment.ops) {
    if (const Segment* body = op_body(op)) {
      deepest = std::max(deepest, max_checkpoint_depth(*body) + (std::holds_alternative<Checkpoint>(op) ? 1 : 0));
    }
  }
  return deepest;
}

}  // namespace

void record_case(const Case& c) {
  std::vector<ValueFacts> leaves;
  for (const Leaf& leaf : c.leaves) {
    const DType dtype = leaf_dtype(c, leaf);
    bump(kDtypes + 5 + static_cast<std::size_t>(dtype));
    for (int64_t dim : leaf.shape) bump(kShapes + clamp(static_cast<std::size_t>(std::max<int64_t>(dim, 0)), 16));
    leaves.push_back(leaf_facts(c, leaf));
  }
  bump(kDtypes + static_cast<std::size_t>(c.dtype));
  walk(c.root, leaves, leaves, 0, false, false);
  bump(kMaxDepth + clamp(static_cast<std::size_t>(max_checkpoint_depth(c.root)), 16));
  for (const std::string& label : case_features(c)) bump(kLabels + std::hash<std::string>{}(label) % kLabelSlots);
}

Verdicts verdicts_of(const std::vector<PropertyResult>& results) {
  // By the property's place in properties(): a check may leave some out (EagerRun::when_needed).
  const auto& all = properties();
  Verdicts verdicts;
  for (const PropertyResult& r : results) {
    std::size_t i = 0;
    while (i < all.size() && r.property != all[i].name) ++i;
    if (i < 16) verdicts.emplace_back(static_cast<uint8_t>(i), static_cast<uint8_t>(r.classification));
  }
  return verdicts;
}

void record_verdicts(const Verdicts& verdicts) {
  for (const auto& [property, classification] : verdicts) bump(kVerdicts + property * 5u + classification);
}

const uint8_t* counters() { return recheck_extra_counters; }

void clear_counters() { std::fill(std::begin(recheck_extra_counters), std::end(recheck_extra_counters), 0); }

std::size_t counters_set() {
  std::size_t n = 0;
  for (uint8_t c : recheck_extra_counters) n += c != 0;
  return n;
}

}  // namespace recheck::fuzz
