// One case run three ways (eager mode, an oracle, a sut) and a property's result found among
// check_properties' results: what the tests of classification rules share.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracles/eager.h"
#include "properties/report.h"

namespace recheck {

struct Runs3 {
  Observations eager, oracle, sut;
};

inline Runs3 run_three(const char* case_json, const std::string& oracle_name, const std::string& sut_name) {
  const Case c = case_from_json(nlohmann::json::parse(case_json));
  EagerExecution eager;
  auto oracle = make_checkpoint(oracle_name);
  auto sut = make_checkpoint(sut_name);
  return {run_case(c, eager), run_case(c, *oracle), run_case(c, *sut)};
}

// The result for `property`, or null where it was not checked.
inline const PropertyResult* result_for(const std::vector<PropertyResult>& results, const std::string& property) {
  for (const PropertyResult& r : results) {
    if (r.property == property) return &r;
  }
  return nullptr;
}

}  // namespace recheck
