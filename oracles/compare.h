// Comparisons of recorded tensors: bitwise (the default of every property) and within a bound
// of units in the last place. Each returns what differed, never a bare bool.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>

namespace recheck {

struct Difference {
  std::string kind;        // "defined", "dtype", "shape", "value"
  std::string subject;     // what the subject had (for kind "value": the element)
  std::string reference;   // what the reference had
  int64_t index = -1;      // flat index of the first differing element, for kind "value"
  int64_t ulp = -1;        // distance in units in the last place, for kind "value"
  std::string describe() const;
};

// The first difference in dtype, shape or bytes (NaN payloads and signed zeros count), or none.
// Two undefined tensors are equal.
std::optional<Difference> bitwise_difference(const at::Tensor& subject, const at::Tensor& reference);

// Distance in units in the last place between two values of a floating dtype; NaN against a
// number, or numbers of different sign far apart, give INT64_MAX.
int64_t ulp_distance(double a, double b, at::ScalarType dtype);

// The first element further apart than `max_ulp` units in the last place of the tensors' scale
// (the largest magnitude in the reference), or none. Dtype, shape and definedness must match.
std::optional<Difference> scaled_ulp_difference(const at::Tensor& subject, const at::Tensor& reference,
                                                int64_t max_ulp);

// The bound grads-match-eager allows where the summation order may differ (docs/properties.md).
int64_t grad_ulp_bound(at::ScalarType dtype);

std::string shape_string(at::IntArrayRef sizes);

}  // namespace recheck
