// The builder's choices (properties/case_builder.cpp), from one of two sources: every choice
// goes through choose_in_range and choose_weighted, which RapidCheck draws when a property test
// or `recheck run` generates a case (and shrinks towards the first alternative), and which the
// fuzzer's bytes decide when decode_case reads one. One builder, two sources, so that decoded
// cases are as valid and reach the same corners as generated ones.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <rapidcheck.h>

namespace recheck::choices {

// The bytes choices are read from while build_case reads a fuzzer input; null: RapidCheck draws.
inline thread_local FuzzedDataProvider* t_bytes = nullptr;

// In [lo, hi). Out of bytes, FuzzedDataProvider yields lo: a short input decodes to a small case.
template <typename T>
T choose_in_range(T lo, T hi) {
  if (t_bytes != nullptr) return t_bytes->ConsumeIntegralInRange<T>(lo, hi - 1);
  return *rc::gen::inRange<T>(lo, hi);
}

template <typename T>
T choose_weighted(std::initializer_list<std::pair<std::size_t, T>> weights) {
  if (t_bytes == nullptr) return *rc::gen::weightedElement<T>(weights);
  std::size_t total = 0;
  for (const auto& [weight, value] : weights) total += weight;
  std::size_t draw = t_bytes->ConsumeIntegralInRange<std::size_t>(0, total - 1);
  for (const auto& [weight, value] : weights) {
    if (draw < weight) return value;
    draw -= weight;
  }
  return weights.begin()->second;  // not reached: draw < total
}

template <typename T>
T pick(const std::vector<T>& options) {
  return options[choose_in_range<std::size_t>(0, options.size())];
}

// Picks among weighted alternatives; shrinking moves towards the first one.
inline size_t pick_weighted(std::initializer_list<std::pair<std::size_t, size_t>> weights) {
  return choose_weighted<size_t>(weights);
}

}  // namespace recheck::choices
