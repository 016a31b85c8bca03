// A case checked with two of the port's variants, its results by property name: what the tests
// that assert one property's classification read.
#pragma once

#include <map>
#include <string>

#include "properties/report.h"
#include "suts/subject.h"

namespace recheck::test_results {

inline std::map<std::string, PropertyResult> results_of(const Case& c, const char* oracle_name, const char* sut_name) {
  auto oracle = make_checkpoint(oracle_name);
  auto sut = make_checkpoint(sut_name);
  std::map<std::string, PropertyResult> by_property;
  for (const PropertyResult& r : check_case(c, *oracle, *sut).results) by_property[r.property] = r;
  return by_property;
}

}  // namespace recheck::test_results
