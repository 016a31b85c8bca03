// Checking one case end to end (eager, oracle and sut runs, then every property), and the
// summary of many: the counts per property and classification, the table and the JSON report.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/case.h"
#include "properties/properties.h"

namespace recheck {

struct CaseResult {
  std::vector<PropertyResult> results;
  int64_t op_executions = 0;  // over the three runs
  bool has_alarm() const;
  bool all_pass() const;
};

CaseResult check_case(const Case& c, CheckpointImplementation& oracle, CheckpointImplementation& sut);

// Prints each property's verdicts and evidence, one block per property.
std::string describe_results(const std::vector<PropertyResult>& results);

constexpr size_t kClassificationCount = 5;

class Summary {
 public:
  void add(const CaseResult& result);
  int64_t cases() const { return cases_; }
  int64_t count(Classification c) const;
  int64_t alarms() const { return count(Classification::regression) + count(Classification::divergent); }
  std::string table() const;
  nlohmann::json to_json() const;

 private:
  int64_t cases_ = 0;
  std::map<std::string, std::array<int64_t, kClassificationCount>> counts_;
};

}  // namespace recheck
