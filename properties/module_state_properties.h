// The property of the module state a case's state ops read and write (core/case.h ModuleState):
// each module's running mean and step counter after every iteration, against eager mode's
// (declared in properties.cpp).
#pragma once

#include <vector>

#include "properties/properties.h"

namespace recheck {

// After every iteration, each module was updated as often as eager mode's and holds eager mode's
// running mean and step counter, bit for bit.
Verdict module_state_matches_eager(const Observations& subject, const Runs& runs);

// Whether two iterations left the modules in the same state.
bool same_module_state(const std::vector<ModuleRecord>& a, const std::vector<ModuleRecord>& b);

}  // namespace recheck
