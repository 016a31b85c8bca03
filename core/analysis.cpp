#include "core/analysis.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "core/case_detail.h"
#include "core/shapes.h"

namespace recheck {

using case_detail::saturating_times;

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

Shape make_shape(std::vector<int64_t> dims) { return std::make_shared<const std::vector<int64_t>>(std::move(dims)); }

namespace {

// A new tensor computed from `x`: the same kind, dtype, shape and requires_grad, but a fresh,
// contiguous non-leaf that is nobody's view.
ValueFacts computed_from(const ValueFacts& x) {
  ValueFacts f = x;
  f.leaf = false;
  f.view = false;
  f.contiguous = true;
  return f;
}

Shape view_shape(View::Fn fn, const Shape& x) {
  if (!x) return nullptr;
  std::vector<int64_t> dims = *x;
  switch (fn) {
    case View::Fn::transpose:
      if (dims.size() >= 2) std::swap(dims[dims.size() - 2], dims.back());
      break;
    case View::Fn::narrow:
      if (!dims.empty()) {
        if (dims[0] == 0) return nullptr;  // narrow(0, 0, 1) of nothing raises
        dims[0] = std::max<int64_t>(1, dims[0] / 2);
      }
      break;
    case View::Fn::flatten: dims = {shapes::element_count(dims)}; break;
  }
  return make_shape(std::move(dims));
}

// One rule per op kind, and no catch-all: std::visit needs every alternative of Op.
struct PlainOpFacts {
  const std::vector<ValueFacts>& values;
  const std::vector<ValueFacts>& leaves;
  int64_t* copies;

  // A new tensor from values `a` and `b`, like `a`, requiring grad when either does, of the
  // shape `rule` gives theirs (none where they do not fit together).
  template <typename Rule>
  ValueFacts of_two(int a, int b, const Rule& rule) const {
    ValueFacts f = computed_from(values[a]);
    f.requires_grad = values[a].requires_grad || values[b].requires_grad;
    std::optional<std::vector<int64_t>> dims;
    if (values[a].shape && values[b].shape) dims = rule(*values[a].shape, *values[b].shape, copies);
    f.shape = dims ? make_shape(std::move(*dims)) : nullptr;
    return f;
  }

  std::vector<ValueFacts> operator()(const Unary& op) const { return {computed_from(values[op.x])}; }
  std::vector<ValueFacts> operator()(const Binary& op) const {
    return {of_two(op.a, op.b, [](const auto& a, const auto& b, int64_t*) { return shapes::broadcast(a, b); })};
  }
  std::vector<ValueFacts> operator()(const Matmul& op) const { return {of_two(op.a, op.b, shapes::matmul)}; }
  std::vector<ValueFacts> operator()(const View& op) const {
    ValueFacts f = values[op.x];
    f.leaf = false;
    f.view = op.fn != View::Fn::flatten || f.contiguous;  // reshape of a non-contiguous tensor copies
    f.contiguous = f.contiguous && op.fn != View::Fn::transpose;
    f.shape = view_shape(op.fn, f.shape);
    return {f};
  }
  // The same tensor, changed in place.
  std::vector<ValueFacts> operator()(const InPlace& op) const { return {values[op.x]}; }
  std::vector<ValueFacts> operator()(const Reduce& op) const {
    ValueFacts f = computed_from(values[op.x]);
    if (f.shape) f.shape = make_shape({});
    return {f};
  }
  std::vector<ValueFacts> operator()(const Argmax& op) const {
    ValueFacts f;
    f.dtype = DType::int64;
    f.shape = values[op.x].shape ? make_shape({}) : nullptr;
    return {f};
  }
  std::vector<ValueFacts> operator()(const Random& op) const { return {computed_from(values[op.x])}; }
  std::vector<ValueFacts> operator()(const Stash&) const { return {}; }
  std::vector<ValueFacts> operator()(const Discard&) const { return {}; }
  // Where it does not raise, the same tensor.
  std::vector<ValueFacts> operator()(const Raise& op) const { return {values[op.x]}; }
  // The same tensor, with a hook on it.
  std::vector<ValueFacts> operator()(const Hook& op) const { return {values[op.x]}; }
  // running-mean: the same tensor; count: x times a Python float, a new tensor of x's dtype.
  std::vector<ValueFacts> operator()(const ModuleState& op) const {
    if (op.fn == ModuleState::Fn::running_mean) return {values[op.x]};
    return {computed_from(values[op.x])};
  }
  // The leaf itself, in a body too: no checkpoint detaches what it does not receive.
  std::vector<ValueFacts> operator()(const Capture& op) const { return {leaves.at(static_cast<size_t>(op.leaf))}; }
  std::vector<ValueFacts> operator()(const Checkpoint&) const {
    throw std::logic_error("plain_op_facts: a checkpoint's outputs come from its body");
  }
  std::vector<ValueFacts> operator()(const Fork&) const {
    throw std::logic_error("plain_op_facts: a fork's outputs come from its body");
  }
  std::vector<ValueFacts> operator()(const Autocast&) const {
    throw std::logic_error("plain_op_facts: an autocast region's outputs come from its body");
  }
};

}  // namespace

ValueFacts leaf_facts(const Case& c, const Leaf& leaf) {
  ValueFacts f;
  f.shape = make_shape(leaf.shape);
  f.dtype = leaf_dtype(c, leaf);
  f.requires_grad = leaf.requires_grad;
  f.leaf = true;
  return f;
}

ValueFacts arg_facts(const Arg& arg, const std::vector<ValueFacts>& values) {
  ValueFacts f;
  if (const auto* ref = std::get_if<Ref>(&arg)) {
    if (ref->value >= 0 && static_cast<std::size_t>(ref->value) < values.size()) return values[ref->value];
    f.kind = ValueFacts::Kind::none;
  } else {
    f.kind = std::holds_alternative<None>(arg) ? ValueFacts::Kind::none : ValueFacts::Kind::literal;
  }
  return f;
}

ValueFacts as_body_input(ValueFacts facts) {
  facts.leaf = false;
  return facts;
}

std::vector<ValueFacts> plain_op_facts(const Op& op, const std::vector<ValueFacts>& values,
                                       const std::vector<ValueFacts>& leaves, int64_t* copies) {
  int64_t ignored = 0;
  int64_t* const made = copies != nullptr ? copies : &ignored;
  *made = 0;
  return std::visit(PlainOpFacts{values, leaves, made}, op);
}

std::vector<ValueFacts> leaves_facts(const Case& c) {
  std::vector<ValueFacts> facts;
  facts.reserve(c.leaves.size());
  for (const Leaf& leaf : c.leaves) facts.push_back(leaf_facts(c, leaf));
  return facts;
}

std::vector<ValueFacts> checkpoint_output_facts(const std::vector<ValueFacts>& args,
                                                const std::vector<ValueFacts>& body_outputs) {
  bool any_requires_grad = false;
  for (const ValueFacts& a : args) any_requires_grad = any_requires_grad || (a.kind == ValueFacts::Kind::tensor && a.requires_grad);
  std::vector<ValueFacts> outputs;
  for (const ValueFacts& body_output : body_outputs) {
    ValueFacts& f = outputs.emplace_back(computed_from(body_output));
    if (f.kind == ValueFacts::Kind::tensor && f.floating()) f.requires_grad = any_requires_grad;
  }
  return outputs;
}

}  // namespace recheck
