// What the memory tests share: a small residual-stream model and a property's classification.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "properties/generator.h"
#include "properties/report.h"

namespace recheck {

// Three layers of two [16, 8] streams: small enough for every tier, large enough to tell bytes.
inline ResidualStreamOptions small_model() {
  ResidualStreamOptions model;
  model.layers = 3;
  model.streams = 2;
  model.seq = 16;
  model.hidden = 8;
  return model;
}

// The classification of `property` in `result`; a test failure where the result has none.
inline Classification classification_of(const CaseResult& result, const std::string& property) {
  for (const PropertyResult& r : result.results) {
    if (r.property == property) return r.classification;
  }
  ADD_FAILURE() << "no property " << property;
  return Classification::pass;
}

}  // namespace recheck
