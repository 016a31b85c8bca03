#include "core/tensor_ops.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "core/discards.h"
#include "core/errors.h"
#include "core/op_trace.h"
#include "core/rng.h"
#include "core/shapes.h"

namespace recheck::tensor_ops {

namespace {

std::atomic<int64_t> g_value_element_limit{Limits{}.leaf_elements};

// Raises MemoryError, before anything is allocated, for a value over the element limit.
void check_value_elements(const char* op, int64_t elements) {
  const int64_t limit = g_value_element_limit.load();
  if (elements > limit) {
    throw PythonError("MemoryError", std::string("recheck: ") + op + " would make a tensor of " +
                                         std::to_string(elements) + " elements, over the limit leaf_elements=" +
                                         std::to_string(limit));
  }
}

}  // namespace

void set_element_limit(int64_t elements) { g_value_element_limit.store(elements); }

const at::Tensor& expect_tensor(const Value& value, const char* op) {
  if (!is_tensor(value)) {
    throw PythonError("TypeError", std::string(op) + "() expects a tensor, got " + python_type_name(value));
  }
  // A discarded output read before its recomputation: libtorch's kernels would read freed memory
  // (a crash), so the op raises, as an op of a checked build would.
  if (!data_allocated(as_tensor(value))) {
    throw PythonError("RuntimeError", std::string(op) + "() reads a tensor whose storage holds none of its elements "
                                                         "(a discarded output not recomputed yet)");
  }
  return as_tensor(value);
}

Values run(const Unary& op, const Values& v) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "unary");
  switch (op.fn) {
    case Unary::Fn::tanh: return {at::tanh(x)};
    case Unary::Fn::sigmoid: return {at::sigmoid(x)};
    case Unary::Fn::neg: return {at::neg(x)};
    case Unary::Fn::square: return {at::mul(x, x)};
    case Unary::Fn::relu: return {at::relu(x)};
  }
  return {};
}

Values run(const Binary& op, const Values& v) {
  const at::Tensor& a = expect_tensor(v.at(op.a), "binary");
  const at::Tensor& b = expect_tensor(v.at(op.b), "binary");
  if (const auto dims = shapes::broadcast(a.sizes().vec(), b.sizes().vec())) {
    check_value_elements("binary", shapes::element_count(*dims));
  }
  switch (op.fn) {
    case Binary::Fn::add: return {at::add(a, b)};
    case Binary::Fn::sub: return {at::sub(a, b)};
    case Binary::Fn::mul: return {at::mul(a, b)};
  }
  return {};
}

Values run(const Matmul& op, const Values& v) {
  const at::Tensor& a = expect_tensor(v.at(op.a), "matmul");
  const at::Tensor& b = expect_tensor(v.at(op.b), "matmul");
  int64_t copies = 0;
  if (const auto dims = shapes::matmul(a.sizes().vec(), b.sizes().vec(), &copies)) {
    check_value_elements("matmul", std::max(shapes::element_count(*dims), copies));
  }
  return {at::matmul(a, b)};
}

Values run(const View& op, const Values& v) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "view");
  switch (op.fn) {
    case View::Fn::transpose: return {x.dim() >= 2 ? x.transpose(-2, -1) : x.view(x.sizes())};
    case View::Fn::narrow: return {x.dim() >= 1 ? x.narrow(0, 0, std::max<int64_t>(1, x.size(0) / 2)) : x.view(x.sizes())};
    case View::Fn::flatten: return {x.reshape({-1})};
  }
  return {};
}

Values run(const InPlace& op, const Values& v) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "inplace");
  switch (op.fn) {
    case InPlace::Fn::mul: x.mul_(op.scalar); break;
    case InPlace::Fn::add: x.add_(op.scalar); break;
  }
  return {x};
}

Values run(const Reduce& op, const Values& v) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "reduce");
  return {op.fn == Reduce::Fn::sum ? x.sum() : x.mean()};
}

Values run(const Argmax& op, const Values& v) { return {at::argmax(expect_tensor(v.at(op.x), "argmax"))}; }

namespace {

// Calls `draw(generator, where)` with the generator the op's source names and the device it
// draws on: the CPU generator, the device's, or the device's inside the tracker's fork of the
// op's state.
template <typename Draw>
void from_source(const Random& op, const at::Tensor& x, const Draw& draw) {
  switch (op.source) {
    case RngSource::cpu: draw(rng::cpu_generator(), at::Device(at::kCPU)); return;
    case RngSource::device: draw(rng::device_generator(), x.device()); return;
    case RngSource::tracker: rng::tracker_fork(op.tracker_state, [&] { draw(rng::device_generator(), x.device()); }); return;
  }
}

}  // namespace

Values run(const Random& op, const Values& v, uint64_t* drawn) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "random");
  if (op.fn == Random::Fn::rrelu) {
    // The kernel itself, as nn.RReLU calls it in training mode: it draws a slope for each
    // negative element, in x's dtype, into `noise`, which its backward multiplies by. nn.RReLU
    // hands it an uninitialized tensor; recheck zeroes it, so that a gradient that reads it
    // before the kernel filled it (pytorch#193671) is the same wrong value in every run, not
    // whatever the allocator left there: a finding must replay, and two runs must agree.
    at::Tensor noise = at::zeros_like(x);
    at::Tensor out;
    from_source(op, x, [&](const at::Generator& generator, at::Device) {
      out = at::rrelu_with_noise(x, noise, kRreluLower, op.p, /*training=*/true, generator);
    });
    if (drawn != nullptr) *drawn = fingerprint({Value(noise)});
    return {out};
  }
  at::Tensor sample;
  from_source(op, x, [&](const at::Generator& generator, at::Device where) {
    sample = at::empty(x.sizes(), at::TensorOptions().dtype(at::kFloat).device(where));
    if (op.fn == Random::Fn::dropout) sample.bernoulli_(1.0 - op.p, generator);
    else sample.normal_(0.0, 1.0, generator);
    sample = sample.to(x.device(), x.scalar_type());
  });
  if (drawn != nullptr) *drawn = fingerprint({Value(sample)});
  if (op.fn == Random::Fn::dropout) return {x * sample / (1.0 - op.p)};
  return {x + sample * op.p};
}

}  // namespace recheck::tensor_ops
