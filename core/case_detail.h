// What the case model's files share, inside core/ only: the names of enum values in case files,
// the bounded arithmetic of the limits, and the message for a count over a limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/case.h"

namespace recheck::case_detail {

template <typename E>
struct Names {
  E value;
  const char* name;
};

inline constexpr Names<DType> kDTypes[] = {{DType::float32, "float32"}, {DType::float64, "float64"},
                                    {DType::bfloat16, "bfloat16"}, {DType::int64, "int64"},
                                    {DType::boolean, "bool"}};
inline constexpr Names<Fill> kFills[] = {{Fill::randn, "randn"}, {Fill::ones, "ones"}, {Fill::arange, "arange"}};
inline constexpr Names<RngSource> kSources[] = {
    {RngSource::cpu, "cpu"}, {RngSource::device, "device"}, {RngSource::tracker, "tracker"}};
inline constexpr Names<Unary::Fn> kUnaryFns[] = {{Unary::Fn::tanh, "tanh"}, {Unary::Fn::sigmoid, "sigmoid"},
                                          {Unary::Fn::neg, "neg"}, {Unary::Fn::square, "square"},
                                          {Unary::Fn::relu, "relu"}};
inline constexpr Names<Binary::Fn> kBinaryFns[] = {
    {Binary::Fn::add, "add"}, {Binary::Fn::sub, "sub"}, {Binary::Fn::mul, "mul"}};
inline constexpr Names<View::Fn> kViewFns[] = {
    {View::Fn::transpose, "transpose"}, {View::Fn::narrow, "narrow"}, {View::Fn::flatten, "flatten"}};
inline constexpr Names<InPlace::Fn> kInPlaceFns[] = {{InPlace::Fn::mul, "mul"}, {InPlace::Fn::add, "add"}};
inline constexpr Names<Reduce::Fn> kReduceFns[] = {{Reduce::Fn::sum, "sum"}, {Reduce::Fn::mean, "mean"}};
inline constexpr Names<Autocast::Precision> kPrecisions[] = {{Autocast::Precision::bfloat16, "bfloat16"},
                                                             {Autocast::Precision::float16, "float16"}};
inline constexpr Names<Raise::When> kRaiseWhens[] = {
    {Raise::When::always, "always"}, {Raise::When::recompute, "recompute"}, {Raise::When::first_iteration, "first-iteration"}};
inline constexpr Names<Hook::Kind> kHookKinds[] = {{Hook::Kind::tensor, "tensor"}, {Hook::Kind::accumulator, "accumulator"},
                                                       {Hook::Kind::post_accumulate, "post-accumulate"}};
inline constexpr Names<Backward::Call> kBackwardCalls[] = {{Backward::Call::backward, "backward"}, {Backward::Call::grad, "grad"}};
inline constexpr Names<ModuleState::Fn> kModuleStateFns[] = {{ModuleState::Fn::running_mean, "running-mean"},
                                                             {ModuleState::Fn::count, "count"}};
inline constexpr Names<Random::Fn> kRandomFns[] = {{Random::Fn::dropout, "dropout"},
                                                   {Random::Fn::noise, "noise"},
                                                   {Random::Fn::rrelu, "rrelu"},
                                                   {Random::Fn::feature_dropout, "feature-dropout"},
                                                   {Random::Fn::alpha_dropout, "alpha-dropout"},
                                                   {Random::Fn::uniform_noise, "uniform-noise"},
                                                   {Random::Fn::gumbel, "gumbel"},
                                                   {Random::Fn::bernoulli, "bernoulli"},
                                                   {Random::Fn::multinomial, "multinomial"},
                                                   {Random::Fn::randperm, "randperm"}};

// The p a random op's fn takes by default, as PyTorch's layers and samplers do: a dropout
// probability of 1/2, nn.RReLU's upper slope 1/3, a noise scale of 0.1, a temperature of 1.
inline double random_default_p(Random::Fn fn) {
  switch (fn) {
    case Random::Fn::dropout:
    case Random::Fn::feature_dropout:
    case Random::Fn::alpha_dropout: return 0.5;
    case Random::Fn::rrelu: return 1.0 / 3.0;
    case Random::Fn::noise:
    case Random::Fn::uniform_noise:
    case Random::Fn::gumbel: return 0.1;
    case Random::Fn::bernoulli:
    case Random::Fn::multinomial: return 1.0;
    case Random::Fn::randperm: return 0.0;
  }
  return 0.0;
}

// What a random op's p must be for its fn ("a dropout probability in [0, 1)"), or "" where it
// is that: the file reader and validation refuse with the same words.
inline std::string random_p_expected(const Random& op) {
  switch (op.fn) {
    case Random::Fn::dropout:
    case Random::Fn::feature_dropout:
    case Random::Fn::alpha_dropout: return op.p >= 0.0 && op.p < 1.0 ? "" : "a dropout probability in [0, 1)";
    case Random::Fn::rrelu: return op.p >= kRreluLower && op.p <= 1.0 ? "" : "rrelu's upper slope in [0.125, 1]";
    case Random::Fn::bernoulli:
    case Random::Fn::multinomial: return op.p > 0.0 && op.p <= 1e6 ? "" : "a temperature in (0, 1e6]";
    case Random::Fn::randperm: return op.p == 0.0 ? "" : "0 (randperm takes no p)";
    case Random::Fn::noise:
    case Random::Fn::uniform_noise:
    case Random::Fn::gumbel: return "";
  }
  return "";
}

template <typename E, size_t N>
inline const char* name_of(const Names<E> (&table)[N], E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <typename E, size_t N>
inline std::string one_of(const Names<E> (&table)[N]) {
  std::string names;
  for (const auto& entry : table) names += (names.empty() ? "" : ", ") + std::string("\"") + entry.name + "\"";
  return "one of " + names;
}

// The most dimensions a leaf may have. Validation works out the shape of every value, and a
// hostile file could otherwise make it hold 100,000 copies of a shape millions of dimensions
// long; libtorch's own kernels (TensorIterator) take at most 25.
inline constexpr std::size_t kMaxDimensions = 64;

inline std::string too_many_dimensions(const std::string& path, std::size_t dimensions) {
  return path + ": " + std::to_string(dimensions) + " dimensions, more than " + std::to_string(kMaxDimensions) +
         " (a fixed bound: every value's shape is worked out before the case runs)";
}

// `value` is the count reached; INT64_MAX where the count went past what int64_t holds, and
// then the message says "more than the limit" rather than a number that was never counted.
inline std::string over_limit(const std::string& what, int64_t value, const char* limit, int64_t bound) {
  const std::string count = value == INT64_MAX ? "more than " + std::to_string(bound) : std::to_string(value);
  return what + " " + count + " is over the limit " + limit + "=" + std::to_string(bound) +
         " (raise it with --limits " + limit + "=N)";
}

// a * b and a + b for non-negative a and b, INT64_MAX where the result would not fit: a shape
// like [2^32, 2^32] must not wrap around to an element count of 0.
inline int64_t saturating_times(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}
inline int64_t saturating_plus(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

// "v3": how show and error messages name value 3.
inline std::string v(int n) { return "v" + std::to_string(n); }

}  // namespace recheck::case_detail
