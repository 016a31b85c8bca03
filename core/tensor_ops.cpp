#include "core/tensor_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
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

// What a random op makes of x; `drawn` gets what it drew (a mask, noise, slopes, indices), on
// x's device. Each fn as core/case.h says, computed as properties/export_runtime.py computes it:
// the same ops in the same order, so that an exported script's values are recheck's.
at::Tensor random_op(const Random& op, const at::Tensor& x, at::Tensor& drawn) {
  // A float32 tensor of `sizes` filled on the source's device by `fill(t, generator, where)`
  // (an in-place sampler), then moved to x's device and dtype.
  const auto sampled = [&](at::IntArrayRef sizes, const auto& fill) {
    from_source(op, x, [&](const at::Generator& generator, at::Device where) {
      drawn = at::empty(sizes, at::TensorOptions().dtype(at::kFloat).device(where));
      fill(drawn, generator, where);
      drawn = drawn.to(x.device(), x.scalar_type());
    });
    return drawn;
  };
  const auto keep_mask = [&](at::IntArrayRef sizes) {
    return sampled(sizes, [&](at::Tensor& t, const at::Generator& g, at::Device) { t.bernoulli_(1.0 - op.p, g); });
  };
  // x's elements in the order of int64 indices drawn on the source's device.
  const auto gathered = [&](const auto& draw) {
    from_source(op, x, [&](const at::Generator& generator, at::Device where) {
      drawn = draw(generator, where).to(x.device());
    });
    return x.reshape(-1).index_select(0, drawn).reshape(x.sizes());
  };
  switch (op.fn) {
    case Random::Fn::dropout: return x * keep_mask(x.sizes()) / (1.0 - op.p);
    case Random::Fn::feature_dropout: {
      std::vector<int64_t> rows(static_cast<size_t>(x.dim()), 1);
      if (!rows.empty()) rows[0] = x.size(0);
      return x * keep_mask(rows) / (1.0 - op.p);
    }
    case Random::Fn::alpha_dropout: {
      const at::Tensor keep = keep_mask(x.sizes());
      const double a = 1.0 / std::sqrt((kAlphaDropoutSaturation * kAlphaDropoutSaturation * op.p + 1.0) * (1.0 - op.p));
      return x * (keep * a) + ((keep - 1.0) * (kAlphaDropoutSaturation * a) + kAlphaDropoutSaturation * a * op.p);
    }
    case Random::Fn::noise:
      return x + sampled(x.sizes(), [](at::Tensor& t, const at::Generator& g, at::Device) { t.normal_(0.0, 1.0, g); }) * op.p;
    case Random::Fn::uniform_noise:
      return x + (sampled(x.sizes(), [](at::Tensor& t, const at::Generator& g, at::Device) { t.uniform_(0.0, 1.0, g); }) - 0.5) * op.p;
    case Random::Fn::gumbel:
      return x + sampled(x.sizes(), [](at::Tensor& t, const at::Generator& g, at::Device) { t.exponential_(1.0, g).log_().neg_(); }) * op.p;
    case Random::Fn::bernoulli: {
      const at::Tensor probabilities = at::sigmoid(x.detach().to(at::kFloat) / op.p);
      const at::Tensor sample = sampled(x.sizes(), [&](at::Tensor& t, const at::Generator& g, at::Device where) {
        t.bernoulli_(probabilities.to(where), g);
      });
      const at::Tensor soft = at::sigmoid(x / op.p);
      return (sample - soft.detach()) + soft;
    }
    case Random::Fn::rrelu: {
      // The kernel itself, as nn.RReLU calls it in training mode: it draws a slope for each
      // negative element, in x's dtype, into `noise`, which its backward multiplies by. nn.RReLU
      // hands it an uninitialized tensor; recheck zeroes it, so that a gradient that reads it
      // before the kernel filled it (pytorch#193671) is the same wrong value in every run, not
      // whatever the allocator left there: a finding must replay, and two runs must agree.
      drawn = at::zeros_like(x);
      at::Tensor out;
      from_source(op, x, [&](const at::Generator& generator, at::Device) {
        out = at::rrelu_with_noise(x, drawn, kRreluLower, op.p, /*training=*/true, generator);
      });
      return out;
    }
    case Random::Fn::multinomial: {
      const at::Tensor weights = at::softmax(at::nan_to_num(x.detach().reshape(-1).to(at::kFloat) / op.p), 0);
      return gathered([&](const at::Generator& g, at::Device where) {
        return at::multinomial(weights.to(where), weights.numel(), /*replacement=*/true, g);
      });
    }
    case Random::Fn::randperm:
      return gathered([&](const at::Generator& g, at::Device where) {
        return at::randperm(x.numel(), g, at::TensorOptions().dtype(at::kLong).device(where));
      });
  }
  throw std::logic_error("random: an fn without a computation");
}

}  // namespace

Values run(const Random& op, const Values& v, uint64_t* drawn) {
  const at::Tensor& x = expect_tensor(v.at(op.x), "random");
  at::Tensor draw;
  at::Tensor out = random_op(op, x, draw);
  if (drawn != nullptr) *drawn = fingerprint({Value(draw)});
  return {out};
}

}  // namespace recheck::tensor_ops
