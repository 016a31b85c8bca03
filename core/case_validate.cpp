// Validation: every reference defined where it is used, every value's shape worked out, and
// the whole case held to its limits before anything runs.
#include "core/case.h"

#include <algorithm>
#include <map>
#include <memory>

#include "core/case_detail.h"
#include "core/analysis.h"
#include "core/shapes.h"
#include "core/torch_version.h"

namespace recheck {

using namespace case_detail;

namespace {

void validate_ref(int ref, int available, const std::string& path) {
  if (ref < 0 || ref >= available) {
    throw CaseError(path + ": value v" + std::to_string(ref) + " is not defined here (v0..v" +
                    std::to_string(available - 1) + " are)");
  }
}

}  // namespace


namespace {

using shapes::element_count;

// Bytes a case holds while it is checked, added up as validation goes, at 8 bytes an element
// whatever the dtype: a bound, before anything runs. The path of what went over is put
// together only for the error.
struct ValueBytes {
  const Limits& limits;
  int64_t bytes = 0;
  template <typename Where>
  void add(int64_t elements, int64_t times, const Where& where) {
    bytes = saturating_plus(bytes, saturating_times(saturating_times(elements, times), 8));
    if (bytes > limits.value_bytes) {
      throw CaseError(where() + ": " + over_limit("value bytes", bytes, "value_bytes", limits.value_bytes));
    }
  }
};

// What a value is, for an error that refuses it: "None", "a literal", "a tensor of int64".
std::string what_value_is(const ValueFacts& value) {
  if (value.kind == ValueFacts::Kind::none) return "None";
  if (value.kind == ValueFacts::Kind::literal) return "a literal";
  return std::string("a tensor of ") + to_string(value.dtype);
}

// The field of an op that holds its `k`th input (in op_inputs' order): one overload per op, no
// catch-all, so that a new op names its fields. Those with a body are checked with it.
struct InputField {
  std::size_t k;
  std::string operator()(const Binary&) const { return k == 0 ? ".a" : ".b"; }
  std::string operator()(const Matmul&) const { return k == 0 ? ".a" : ".b"; }
  std::string operator()(const Unary&) const { return ".x"; }
  std::string operator()(const View&) const { return ".x"; }
  std::string operator()(const InPlace&) const { return ".x"; }
  std::string operator()(const Reduce&) const { return ".x"; }
  std::string operator()(const Argmax&) const { return ".x"; }
  std::string operator()(const Random&) const { return ".x"; }
  std::string operator()(const Stash&) const { return ".x"; }
  std::string operator()(const Raise&) const { return ".x"; }
  std::string operator()(const Hook&) const { return ".x"; }
  std::string operator()(const ModuleState&) const { return ".x"; }
  std::string operator()(const Discard& o) const {
    return k < o.checkpoints.size() ? ".checkpoints[" + std::to_string(k) + "]" : ".hook";
  }
  std::string operator()(const Checkpoint& o) const {  // the kth of its arguments that is a value
    std::size_t refs = 0;
    for (std::size_t a = 0; a < o.args.size(); ++a) {
      if (std::holds_alternative<Ref>(o.args[a]) && refs++ == k) return ".args[" + std::to_string(a) + "].ref";
    }
    return ".args";
  }
  std::string operator()(const Fork&) const { return ".args[" + std::to_string(k) + "]"; }
  std::string operator()(const Autocast&) const { return ".args[" + std::to_string(k) + "]"; }
  std::string operator()(const Capture&) const { return ".leaf"; }  // reads no value of its segment
};

std::string input_field(const Op& op, std::size_t k) { return std::visit(InputField{k}, op); }

// Checks a segment whose inputs are `values` (core/analysis.h); gives its outputs'.
// `leaves`: the case's leaves' facts, which a capture reads at any depth.
std::vector<ValueFacts> validate_segment(const Segment& segment, std::vector<ValueFacts> values,
                                         const std::vector<ValueFacts>& leaves, int depth, const std::string& path,
                                         ValueBytes& value_bytes) {
  const Limits& limits = value_bytes.limits;
  if (depth > limits.depth) throw CaseError(path + ": " + over_limit("nesting depth", depth, "depth", limits.depth));
  // The first output of each checkpoint without output here, and whether a discard named it.
  std::map<int, bool> discardable;
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const Op& op = segment.ops[i];
    const int available = static_cast<int>(values.size());
    const std::string op_path = path + ".ops[" + std::to_string(i) + "]";
    std::vector<ValueFacts> made;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      std::vector<ValueFacts> args;
      for (size_t a = 0; a < checkpoint->args.size(); ++a) {
        if (const auto* ref = std::get_if<Ref>(&checkpoint->args[a])) {
          validate_ref(ref->value, available, op_path + ".args[" + std::to_string(a) + "].ref");
        }
        args.push_back(as_body_input(arg_facts(checkpoint->args[a], values)));
      }
      const std::vector<ValueFacts> body =
          validate_segment(*checkpoint->body, args, leaves, depth + 1, op_path + ".body", value_bytes);
      for (size_t o = 0; o < body.size(); ++o) {
        // A value that is a leaf inside a body is a captured leaf, the root's tensor itself: the
        // Function would make it its output, giving the leaf a grad_fn (libtorch's recomputation
        // then waits on its own node forever).
        if (body[o].kind == ValueFacts::Kind::tensor && body[o].leaf) {
          throw CaseError(op_path + ".body.outputs[" + std::to_string(o) +
                          "]: a checkpoint's body returns a captured leaf itself (return a value computed from it)");
        }
      }
      made = checkpoint_output_facts(args, body);
      if (checkpoint->without_output) {
        if (checkpoint->distribute) throw CaseError(op_path + ".distribute: a checkpoint without output does not distribute");
        if (!checkpoint->body->outputs.empty()) discardable[available] = false;
      }
    } else if (const auto* discard = std::get_if<Discard>(&op)) {
      for (size_t k = 0; k < discard->checkpoints.size(); ++k) {
        const std::string where = op_path + ".checkpoints[" + std::to_string(k) + "]";
        const int ref = discard->checkpoints[k];
        validate_ref(ref, available, where);
        const auto found = discardable.find(ref);
        if (found == discardable.end()) {
          throw CaseError(where + ": value v" + std::to_string(ref) +
                          " is not the first output of a checkpoint without output of this segment");
        }
        if (found->second) throw CaseError(where + ": the outputs of the checkpoint giving v" + std::to_string(ref) + " are discarded twice");
        found->second = true;
      }
      validate_ref(discard->hook, available, op_path + ".hook");
      if (values[discard->hook].kind != ValueFacts::Kind::tensor) {
        throw CaseError(op_path + ".hook: value v" + std::to_string(discard->hook) + " is not a tensor");
      }
    } else if (std::holds_alternative<Fork>(op) || std::holds_alternative<Autocast>(op)) {
      if (const auto* region = std::get_if<Autocast>(&op);
          region != nullptr && region->dtype == Autocast::Precision::float16 && !compat::autocast_has_float16(region->device_type)) {
        throw CaseError(op_path + ".dtype: float16 autocast on cpu needs libtorch 2.1 or later (this build: " +
                        TORCH_VERSION + "); use bfloat16");
      }
      // A region run inline: its body's inputs are the values it names.
      const std::vector<int> refs = op_inputs(op);
      std::vector<ValueFacts> args;
      for (size_t a = 0; a < refs.size(); ++a) {
        validate_ref(refs[a], available, op_path + input_field(op, a));
        args.push_back(as_body_input(values[refs[a]]));
      }
      made = validate_segment(*op_body(op), std::move(args), leaves, depth + 1, op_path + ".body", value_bytes);
    } else {
      const auto inputs = op_inputs(op);
      for (std::size_t k = 0; k < inputs.size(); ++k) validate_ref(inputs[k], available, op_path + input_field(op, k));
      if (const auto* capture = std::get_if<Capture>(&op);
          capture != nullptr && (capture->leaf < 0 || static_cast<size_t>(capture->leaf) >= leaves.size())) {
        throw CaseError(op_path + ".leaf: leaf " + std::to_string(capture->leaf) + " is not one of the case's " +
                        std::to_string(leaves.size()) + " leaves");
      }
      if (const auto* hook = std::get_if<Hook>(&op);
          hook != nullptr && values[static_cast<size_t>(hook->x)].kind != ValueFacts::Kind::tensor) {
        throw CaseError(op_path + ".x: a hook hangs on a tensor, and value " + std::to_string(hook->x) + " is " +
                        what_value_is(values[static_cast<size_t>(hook->x)]));
      }
      if (const auto* hook = std::get_if<Hook>(&op); hook != nullptr && hook->kind != Hook::Kind::tensor) {
        const ValueFacts& x = values[static_cast<size_t>(hook->x)];
        if (!(x.leaf && x.requires_grad)) {
          throw CaseError(op_path + ".x: " + to_string(hook->kind) + " hooks hang on a parameter (a leaf that requires grad: a root " +
                          "leaf, or what a capture gives a body), and value " + std::to_string(hook->x) + " is not one");
        }
        if (hook->scale != 1.0) {
          throw CaseError(op_path + ".scale: " + to_string(hook->kind) + " hooks run once the gradient is accumulated and cannot scale it");
        }
      }
      if (const auto* state = std::get_if<ModuleState>(&op)) {
        const ValueFacts& x = values[static_cast<size_t>(state->x)];
        if (x.kind != ValueFacts::Kind::tensor || !x.floating()) {
          throw CaseError(op_path + ".x: a module's state is " +
                          (state->fn == ModuleState::Fn::count ? "read into" : "computed from") +
                          " a floating-point tensor, and value " + std::to_string(state->x) + " is " + what_value_is(x));
        }
      }
      int64_t copies = 0;
      made = plain_op_facts(op, values, leaves, &copies);
      if (!made.empty()) {
        // A leaf within the limits can still make a value far over them ([n, 1] + [1, n]):
        // each value an op makes, and each temporary on the way, is held to the leaves'
        // element limit too.
        const Shape& shape = made.back().shape;
        const int64_t elements = shape ? element_count(*shape) : 0;
        if (elements > limits.leaf_elements) {
          throw CaseError(op_path + ": makes a tensor whose " +
                          over_limit("element count", elements, "leaf_elements", limits.leaf_elements));
        }
        if (copies > limits.leaf_elements) {
          throw CaseError(op_path + ": expands an operand to the batch sizes, a tensor whose " +
                          over_limit("element count", copies, "leaf_elements", limits.leaf_elements));
        }
        // What one iteration makes, each op counted once (not per run of its body), twice
        // over: the value, and its gradient in flight during backward.
        if (shape) value_bytes.add(saturating_plus(elements, copies), 2, [&] { return op_path; });
      }
    }
    if (const auto* random = std::get_if<Random>(&op)) {
      if (const std::string expected = random_p_expected(*random); !expected.empty()) {
        throw CaseError(op_path + ".p: expected " + expected);
      }
    }
    values.insert(values.end(), made.begin(), made.end());
  }
  std::vector<ValueFacts> outputs;
  for (size_t o = 0; o < segment.outputs.size(); ++o) {
    validate_ref(segment.outputs[o], static_cast<int>(values.size()), path + ".outputs[" + std::to_string(o) + "]");
    outputs.push_back(values[segment.outputs[o]]);
  }
  return outputs;
}

// The leaves the training loop differentiates: each a leaf that requires grad, once; grad needs some.
void validate_backward(const Case& c) {
  const std::vector<int>& inputs = c.backward.inputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string path = "case.backward.inputs[" + std::to_string(k) + "]";
    const int n = inputs[k];
    if (n < 0 || static_cast<size_t>(n) >= c.leaves.size()) {
      throw CaseError(path + ": leaf " + std::to_string(n) + " is not one of the case's " + std::to_string(c.leaves.size()) +
                      " leaves");
    }
    if (!c.leaves[static_cast<size_t>(n)].requires_grad) {
      throw CaseError(path + ": leaf " + std::to_string(n) + " does not require grad, and autograd differentiates only "
                      "tensors that do");
    }
    if (std::find(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(k), n) != inputs.begin() + static_cast<std::ptrdiff_t>(k)) {
      throw CaseError(path + ": leaf " + std::to_string(n) + " is named twice");
    }
  }
  if (c.backward.call == Backward::Call::grad && inputs.empty()) {
    throw CaseError("case.backward.inputs: torch.autograd.grad differentiates the leaves it is given, and none is");
  }
}

}  // namespace

void validate(const Case& c, const Limits& limits) {
  if (c.iterations < 1 || c.iterations > limits.iterations) {
    throw CaseError("case.iterations: " + over_limit("iteration count", c.iterations, "iterations", limits.iterations));
  }
  int64_t leaf_bytes = 0;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const Leaf& leaf = c.leaves[i];
    const std::string path = "case.leaves[" + std::to_string(i) + "]";
    const DType dtype = leaf_dtype(c, leaf);
    if (leaf.requires_grad && (dtype == DType::int64 || dtype == DType::boolean)) {
      throw CaseError(path + ".requires_grad: only floating leaves can require grad");
    }
    if (leaf.shape.size() > kMaxDimensions) throw CaseError(too_many_dimensions(path + ".shape", leaf.shape.size()));
    int64_t elements = 1;
    for (int64_t d : leaf.shape) {
      if (d < 0) throw CaseError(path + ".shape: a negative size");
      elements = saturating_times(elements, d);
      if (elements > limits.leaf_elements) {
        throw CaseError(path + ".shape: " +
                        over_limit("element count", elements, "leaf_elements", limits.leaf_elements));
      }
    }
    // A size over the limit is refused where another size is 0 too, in whatever order.
    for (int64_t d : leaf.shape) {
      if (d > limits.leaf_elements) {
        throw CaseError(path + ".shape: " + over_limit("size", d, "leaf_elements", limits.leaf_elements));
      }
    }
    leaf_bytes = saturating_plus(leaf_bytes, saturating_times(elements, static_cast<int64_t>(at::elementSize(scalar_type(dtype)))));
    if (leaf_bytes > limits.leaf_bytes) {
      throw CaseError(path + ": " + over_limit("leaf bytes", leaf_bytes, "leaf_bytes", limits.leaf_bytes));
    }
  }
  validate_backward(c);
  const CaseStats s = stats(c);
  if (s.ops > limits.ops) throw CaseError("case: " + over_limit("op count", s.ops, "ops", limits.ops));
  const std::vector<ValueFacts> leaves = leaves_facts(c);
  // Every run of a case (up to three at once: eager, oracle, sut) keeps a record of each
  // iteration, which holds a copy of each leaf's data and gradient and of each root output.
  const int64_t records = saturating_times(3, c.iterations);
  ValueBytes value_bytes{limits};
  // A leaf: its double-precision draw, kept for the case, the leaf itself, its gradient, and
  // its records.
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    value_bytes.add(element_count(c.leaves[i].shape), saturating_plus(3, saturating_times(2, records)),
                    [&] { return "case.leaves[" + std::to_string(i) + "]"; });
  }
  const std::vector<ValueFacts> outputs = validate_segment(c.root, leaves, leaves, 0, "case.root", value_bytes);
  // A root output: its double-precision loss weight, kept for the case, the weight's copy in
  // the output's dtype, which backward keeps, and its records.
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].shape) continue;
    value_bytes.add(element_count(*outputs[o].shape), saturating_plus(2, records),
                    [&] { return "case.root.outputs[" + std::to_string(o) + "]"; });
  }
}

}  // namespace recheck
