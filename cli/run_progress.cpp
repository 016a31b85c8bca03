#include "cli/run_progress.h"

#include "properties/generator.h"

namespace recheck::cli {

void RunProgress::reached(const Case& c) {
  for (std::string& label : case_features(c)) labels_.insert(std::move(label));
}

void RunProgress::sample(double seconds, int64_t cases, int64_t findings, int64_t alarms, int64_t buckets, bool last) {
  if (!last && seconds < next_) return;
  samples_.push_back({{"seconds", seconds},
                      {"cases", cases},
                      {"findings", findings},
                      {"alarms", alarms},
                      {"buckets", buckets},
                      {"coverage", labels_.size()}});
  next_ = seconds + every_;
  constexpr size_t kMost = 1000;
  if (samples_.size() > kMost) {
    nlohmann::json kept = nlohmann::json::array();
    for (size_t i = 0; i < samples_.size(); i += 2) kept.push_back(samples_[i]);
    if (samples_.size() % 2 == 0) kept.push_back(samples_.back());  // the latest stays
    samples_ = std::move(kept);
    every_ *= 2;
  }
}

}  // namespace recheck::cli
