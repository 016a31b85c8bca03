// Validation: every reference defined where it is used, every value's shape worked out, and
// the whole case held to its limits before anything runs.
#include "core/case.h"

#include <algorithm>
#include <memory>

#include "core/case_detail.h"
#include "core/shapes.h"

namespace recheck {

using namespace case_detail;

namespace {

void validate_ref(int ref, int available, const std::string& path) {
  if (ref < 0 || ref >= available) {
    throw CaseError(path + ": value v" + std::to_string(ref) + " is not defined here (v0..v" +
                    std::to_string(available - 1) + " are)");
  }
}

// What validation knows of a value: a tensor's shape, or nothing (null: not a tensor, or made by
// an op whose inputs do not fit together, which raises when it runs). The ops follow libtorch's
// rules, so that a value's size is known before anything is allocated for it. Shared, not
// copied: a hostile file's fork of millions of arguments must not copy a shape per argument.
using Shape = std::shared_ptr<const std::vector<int64_t>>;

Shape make_shape(std::vector<int64_t> dims) { return std::make_shared<const std::vector<int64_t>>(std::move(dims)); }

}  // namespace

namespace shapes {

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements = saturating_times(elements, d);
  return elements;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

std::optional<std::vector<int64_t>> matmul(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                           int64_t* copies) {
  *copies = 0;
  if (a.empty() || b.empty()) return std::nullopt;
  const int64_t k = a.back();
  if (k != (b.size() == 1 ? b[0] : b[b.size() - 2])) return std::nullopt;
  if (a.size() <= 2 && b.size() <= 2) {
    std::vector<int64_t> out;
    if (a.size() == 2) out.push_back(a[0]);
    if (b.size() == 2) out.push_back(b[1]);
    return out;
  }
  const auto batch_of = [](const std::vector<int64_t>& x) {
    return std::vector<int64_t>(x.begin(), x.end() - std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(x.size())));
  };
  std::optional<std::vector<int64_t>> out = broadcast(batch_of(a), batch_of(b));
  if (!out) return std::nullopt;
  const int64_t batch = element_count(*out);
  const int64_t n = a.size() >= 2 ? a[a.size() - 2] : 1;
  const int64_t m = b.size() >= 2 ? b.back() : 1;
  *copies = std::max(saturating_times(batch, saturating_times(n, k)), saturating_times(batch, saturating_times(k, m)));
  if (a.size() >= 2) out->push_back(n);
  if (b.size() >= 2) out->push_back(m);
  return out;
}

}  // namespace shapes

namespace {

using shapes::element_count;

// The shape of the value `op` makes from values of shapes `in` (the ops of one output), and in
// `copies` the elements of the largest temporary it makes on the way (matmul's batches).
Shape output_shape(const Op& op, const std::vector<Shape>& in, int64_t* copies) {
  *copies = 0;
  if (const auto* binary = std::get_if<Binary>(&op)) {
    const Shape& a = in[binary->a];
    const Shape& b = in[binary->b];
    if (!a || !b) return nullptr;
    auto dims = shapes::broadcast(*a, *b);
    return dims ? make_shape(std::move(*dims)) : nullptr;
  }
  if (const auto* matmul = std::get_if<Matmul>(&op)) {
    const Shape& a = in[matmul->a];
    const Shape& b = in[matmul->b];
    if (!a || !b) return nullptr;
    auto dims = shapes::matmul(*a, *b, copies);
    return dims ? make_shape(std::move(*dims)) : nullptr;
  }
  const Shape& x = in[op_inputs(op)[0]];
  if (!x) return nullptr;
  if (std::holds_alternative<Reduce>(op) || std::holds_alternative<Argmax>(op)) return make_shape({});
  const auto* view = std::get_if<View>(&op);
  if (view == nullptr) return x;  // unary, in-place, random, raise: the input's shape
  std::vector<int64_t> dims = *x;
  switch (view->fn) {
    case View::Fn::transpose:
      if (dims.size() >= 2) std::swap(dims[dims.size() - 2], dims.back());
      break;
    case View::Fn::narrow:
      if (!dims.empty()) {
        if (dims[0] == 0) return nullptr;  // narrow(0, 0, 1) of nothing raises
        dims[0] = std::max<int64_t>(1, dims[0] / 2);
      }
      break;
    case View::Fn::flatten: dims = {element_count(dims)}; break;
  }
  return make_shape(std::move(dims));
}

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

// The field of a plain op that holds its `k`th input: x, or a and b.
const char* input_field(const Op& op, std::size_t k) {
  if (std::holds_alternative<Binary>(op) || std::holds_alternative<Matmul>(op)) return k == 0 ? ".a" : ".b";
  return ".x";
}

// Checks a segment whose inputs have shapes `inputs`; gives its outputs' shapes.
std::vector<Shape> validate_segment(const Segment& segment, std::vector<Shape> values, int depth,
                                    const std::string& path, ValueBytes& value_bytes) {
  const Limits& limits = value_bytes.limits;
  if (depth > limits.depth) throw CaseError(path + ": " + over_limit("nesting depth", depth, "depth", limits.depth));
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const Op& op = segment.ops[i];
    const int available = static_cast<int>(values.size());
    const std::string op_path = path + ".ops[" + std::to_string(i) + "]";
    std::vector<Shape> made;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) {
      std::vector<Shape> args;
      for (size_t a = 0; a < checkpoint->args.size(); ++a) {
        if (const auto* ref = std::get_if<Ref>(&checkpoint->args[a])) {
          validate_ref(ref->value, available, op_path + ".args[" + std::to_string(a) + "].ref");
          args.push_back(values[ref->value]);
        } else {
          args.push_back(nullptr);  // a literal
        }
      }
      made = validate_segment(*checkpoint->body, std::move(args), depth + 1, op_path + ".body", value_bytes);
    } else if (const auto* fork = std::get_if<Fork>(&op)) {
      std::vector<Shape> args;
      for (size_t a = 0; a < fork->args.size(); ++a) {
        validate_ref(fork->args[a], available, op_path + ".args[" + std::to_string(a) + "]");
        args.push_back(values[fork->args[a]]);
      }
      made = validate_segment(*fork->body, std::move(args), depth + 1, op_path + ".body", value_bytes);
    } else {
      const auto inputs = op_inputs(op);
      for (std::size_t k = 0; k < inputs.size(); ++k) validate_ref(inputs[k], available, op_path + input_field(op, k));
      if (op_output_count(op) == 1) {
        int64_t copies = 0;
        made.push_back(output_shape(op, values, &copies));
        // A leaf within the limits can still make a value far over them ([n, 1] + [1, n]):
        // each value an op makes, and each temporary on the way, is held to the leaves'
        // element limit too.
        const int64_t elements = made.back() ? element_count(*made.back()) : 0;
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
        if (made.back()) value_bytes.add(saturating_plus(elements, copies), 2, [&] { return op_path; });
      }
    }
    if (const auto* random = std::get_if<Random>(&op)) {
      if (random->fn == Random::Fn::dropout && !(random->p >= 0.0 && random->p < 1.0)) {
        throw CaseError(op_path + ".p: expected a dropout probability in [0, 1)");
      }
    }
    values.insert(values.end(), made.begin(), made.end());
  }
  std::vector<Shape> outputs;
  for (size_t o = 0; o < segment.outputs.size(); ++o) {
    validate_ref(segment.outputs[o], static_cast<int>(values.size()), path + ".outputs[" + std::to_string(o) + "]");
    outputs.push_back(values[segment.outputs[o]]);
  }
  return outputs;
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
  const CaseStats s = stats(c);
  if (s.ops > limits.ops) throw CaseError("case: " + over_limit("op count", s.ops, "ops", limits.ops));
  std::vector<Shape> leaves;
  for (const Leaf& leaf : c.leaves) leaves.push_back(make_shape(leaf.shape));
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
  const std::vector<Shape> outputs = validate_segment(c.root, std::move(leaves), 0, "case.root", value_bytes);
  // A root output: its double-precision loss weight, kept for the case, the weight's copy in
  // the output's dtype, which backward keeps, and its records.
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o]) continue;
    value_bytes.add(element_count(*outputs[o]), saturating_plus(2, records),
                    [&] { return "case.root.outputs[" + std::to_string(o) + "]"; });
  }
}

}  // namespace recheck
