#include "oracles/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace recheck {

namespace {

std::string format_value(double value) {
  std::ostringstream out;
  out.precision(std::numeric_limits<double>::max_digits10);
  out << value;
  return out.str();
}

double element(const at::Tensor& flat, int64_t index) {
  return flat[index].item<double>();
}

// Maps a float's bits onto integers that are ordered like the floats.
int64_t ordered_bits(double value, at::ScalarType dtype) {
  if (dtype == at::kDouble) {
    int64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits < 0 ? std::numeric_limits<int64_t>::min() - bits : bits;
  }
  float f = static_cast<float>(value);
  int32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  int64_t ordered = bits < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - bits : bits;
  if (dtype == at::kBFloat16 || dtype == at::kHalf) ordered /= 65536;  // bfloat16: the top 16 bits
  return ordered;
}

}  // namespace

std::string shape_string(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

std::string Difference::describe() const {
  std::ostringstream out;
  if (kind == "value") {
    out << "element " << index << ": " << subject << " vs " << reference;
    if (ulp >= 0) {
      out << " (" << (ulp == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(ulp))
          << " ulp)";
    }
  } else {
    out << kind << ": " << subject << " vs " << reference;
  }
  return out.str();
}

int64_t ulp_distance(double a, double b, at::ScalarType dtype) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  }
  const int64_t ia = ordered_bits(a, dtype);
  const int64_t ib = ordered_bits(b, dtype);
  // Differences of ordered 64-bit patterns can overflow; saturate instead.
  if ((ia > 0 && ib < 0 && ia > std::numeric_limits<int64_t>::max() + ib) ||
      (ia < 0 && ib > 0 && ib > std::numeric_limits<int64_t>::max() + ia)) {
    return std::numeric_limits<int64_t>::max();
  }
  return ia > ib ? ia - ib : ib - ia;
}

namespace {

std::optional<Difference> metadata_difference(const at::Tensor& s, const at::Tensor& r) {
  if (s.defined() != r.defined()) {
    return Difference{"defined", s.defined() ? "a tensor" : "None", r.defined() ? "a tensor" : "None"};
  }
  if (!s.defined()) return std::nullopt;
  if (s.scalar_type() != r.scalar_type()) {
    return Difference{"dtype", c10::toString(s.scalar_type()), c10::toString(r.scalar_type())};
  }
  if (s.sizes() != r.sizes()) return Difference{"shape", shape_string(s.sizes()), shape_string(r.sizes())};
  return std::nullopt;
}

Difference value_difference(const at::Tensor& sf, const at::Tensor& rf, int64_t index) {
  const double a = element(sf, index);
  const double b = element(rf, index);
  Difference d{"value", format_value(a), format_value(b), index};
  if (at::isFloatingType(sf.scalar_type())) d.ulp = ulp_distance(a, b, sf.scalar_type());
  if (a == b && std::signbit(a) != std::signbit(b)) d.subject += " (sign)";
  return d;
}

}  // namespace

std::optional<Difference> bitwise_difference(const at::Tensor& subject, const at::Tensor& reference) {
  if (auto d = metadata_difference(subject, reference)) return d;
  // Equal shapes: an empty one on both sides (whose data pointer may be null) holds no bytes.
  if (!subject.defined() || subject.numel() == 0) return std::nullopt;
  const at::Tensor s = subject.to(at::kCPU).contiguous().reshape({-1});
  const at::Tensor r = reference.to(at::kCPU).contiguous().reshape({-1});
  const size_t item = s.element_size();
  const auto* sb = static_cast<const unsigned char*>(s.data_ptr());
  const auto* rb = static_cast<const unsigned char*>(r.data_ptr());
  if (std::memcmp(sb, rb, item * s.numel()) == 0) return std::nullopt;
  for (int64_t i = 0; i < s.numel(); ++i) {
    if (std::memcmp(sb + i * item, rb + i * item, item) != 0) return value_difference(s, r, i);
  }
  return std::nullopt;
}

std::optional<Difference> scaled_ulp_difference(const at::Tensor& subject, const at::Tensor& reference,
                                                int64_t max_ulp) {
  if (auto d = metadata_difference(subject, reference)) return d;
  if (!subject.defined()) return std::nullopt;
  if (!bitwise_difference(subject, reference)) return std::nullopt;
  if (!at::isFloatingType(subject.scalar_type())) return bitwise_difference(subject, reference);
  const at::Tensor s = subject.to(at::kCPU, at::kDouble).contiguous().reshape({-1});
  const at::Tensor r = reference.to(at::kCPU, at::kDouble).contiguous().reshape({-1});
  const at::ScalarType dtype = subject.scalar_type();
  const double scale = r.numel() ? r.abs().max().item<double>() : 0.0;
  // One unit in the last place at the tensor's scale, in the tensor's own dtype.
  double unit;
  if (dtype == at::kDouble) unit = std::nextafter(scale, INFINITY) - scale;
  else if (dtype == at::kFloat) unit = std::nextafter(static_cast<float>(scale), INFINITY) - static_cast<float>(scale);
  else unit = (std::nextafter(static_cast<float>(scale), INFINITY) - static_cast<float>(scale)) * 65536.0;
  const auto* sp = s.data_ptr<double>();
  const auto* rp = r.data_ptr<double>();
  for (int64_t i = 0; i < s.numel(); ++i) {
    const double a = sp[i];
    const double b = rp[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) && std::isnan(b)) continue;
    } else if (std::fabs(a - b) <= static_cast<double>(max_ulp) * unit) {
      continue;
    }
    Difference d = value_difference(subject.to(at::kCPU).contiguous().reshape({-1}),
                                    reference.to(at::kCPU).contiguous().reshape({-1}), i);
    d.ulp = std::isfinite(a - b) && unit > 0 ? static_cast<int64_t>(std::ceil(std::fabs(a - b) / unit))
                                             : std::numeric_limits<int64_t>::max();
    d.reference += " (bound " + std::to_string(max_ulp) + " ulp of scale " + format_value(scale) + ")";
    return d;
  }
  return std::nullopt;
}

int64_t grad_ulp_bound(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? 8 : 64;
}

}  // namespace recheck
