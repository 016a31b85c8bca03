// A run over time, for its --json report and the page drawn from it (recheck page): every few
// seconds, how many cases it had checked, its findings, its buckets, and its coverage (the
// generator's corner labels, properties/generator.h's case_features, reached so far).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case.h"

namespace recheck::cli {

class RunProgress {
 public:
  void reached(const Case& c);  // a case checked: what it covers
  // A sample at `seconds`, kept when a sample is due (or `last`). At most about a thousand are
  // kept: past that, every other one is dropped and the interval doubles.
  void sample(double seconds, int64_t cases, int64_t findings, int64_t alarms, int64_t buckets, bool last = false);
  size_t coverage() const { return labels_.size(); }
  // [{"seconds", "cases", "findings", "alarms", "buckets", "coverage"}, ...]
  const nlohmann::json& samples() const { return samples_; }

 private:
  std::set<std::string> labels_;
  nlohmann::json samples_ = nlohmann::json::array();
  double every_ = 1;
  double next_ = 0;
};

}  // namespace recheck::cli
