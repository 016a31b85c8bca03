// The module-state property: what the state ops left in each module, against eager mode's.
#include "properties/module_state_properties.h"

#include <cstdio>
#include <string>
#include <vector>

#include "properties/records.h"

namespace recheck {

namespace {

std::string shortest(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

}  // namespace

bool same_module_state(const std::vector<ModuleRecord>& a, const std::vector<ModuleRecord>& b) { return a == b; }

// As grads-match-eager, not after an error in backward: which recomputations the engine had run
// depends on the order it ran the graph, which checkpointing changes.
Verdict module_state_matches_eager(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& sr = subject.iterations[i];
    const IterationRecord& er = eager.iterations[i];
    if (!comparable(sr, er) || (sr.error && sr.error->phase != "forward")) continue;
    for (size_t k = 0; k < sr.modules.size() && k < er.modules.size(); ++k) {
      const ModuleRecord& s = sr.modules[k];
      const ModuleRecord& e = er.modules[k];
      if (s == e) continue;
      const std::string where = at_record(i, sr) + ", module " + std::to_string(s.module);
      const std::string state = "its step counter " + std::to_string(s.steps) + " vs " + std::to_string(e.steps) +
                                ", its running mean " + shortest(s.running_mean) + " vs " + shortest(e.running_mean);
      if (s.updates != e.updates) {
        return fail_at(i, sr, where, std::nullopt,
                       std::string("updated ") + (s.updates > e.updates ? "more" : "fewer") + " times than eager mode's (" +
                           std::to_string(s.updates) + " vs " + std::to_string(e.updates) + "): " + state);
      }
      return fail_at(i, sr, where, std::nullopt, "updated as often as eager mode's, to another state: " + state);
    }
  }
  return Verdict::pass();
}

}  // namespace recheck
