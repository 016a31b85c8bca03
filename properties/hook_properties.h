// The properties of the hooks a case's hook ops hang (core/case.h Hook): how often each is
// called and what it sees, against eager mode's calls and the oracle's (declared in
// properties.cpp).
#pragma once

#include "properties/properties.h"

namespace recheck {

// Each hook is called as often as eager mode's, each call with a gradient within the ulp bound
// of eager mode's call in the same place of that hook's calls.
Verdict hook_calls_match_eager(const Observations& subject, const Runs& runs);
// The calls, all hooks together, in the order the oracle's came, each with the oracle's gradient
// bit for bit.
Verdict hook_calls_bitwise(const Observations& subject, const Runs& runs);

// Whether two iterations' hook calls are the same calls in the same order, bitwise.
bool same_hook_calls(const std::vector<HookCall>& a, const std::vector<HookCall>& b);

}  // namespace recheck
