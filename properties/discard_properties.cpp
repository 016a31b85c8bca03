#include "properties/discard_properties.h"

#include "oracles/compare.h"
#include "properties/records.h"

namespace recheck {

Verdict discard_own_outputs(const Observations& subject, const Runs&) {
  for (size_t i = 0; i < subject.iterations.size(); ++i) {
    const IterationRecord& r = subject.iterations[i];
    for (const DiscardRecord& d : r.discards) {
      if (d.touched.empty()) continue;
      return fail_at(i, r, at_record(i, r) + ", discard " + d.site + " of " + d.checkpoint, std::nullopt,
                     "it changed the caller's " + d.touched.front() +
                         (d.touched.size() > 1 ? " (and " + std::to_string(d.touched.size() - 1) + " more)" : ""));
    }
  }
  return Verdict::pass();
}

Verdict discard_recomputed(const Observations& subject, const Runs&) {
  for (size_t i = 0; i < subject.iterations.size(); ++i) {
    const IterationRecord& r = subject.iterations[i];
    if (r.error) continue;  // an iteration that raised: errors-match judges it
    for (const DiscardRecord& d : r.discards) {
      if (!d.freed) continue;  // nothing to recompute (eager mode)
      const std::string where = at_record(i, r) + ", outputs of " + d.checkpoint + " discarded at " + d.site;
      if (!d.hook_reached) {
        // Nothing read them in backward: never recomputed, as it should be.
        if (d.recomputations > 0) {
          return fail_at(i, r, where, std::nullopt,
                         "recomputed " + std::to_string(d.recomputations) + " times, though backward never reached its hook");
        }
        continue;
      }
      if (d.recomputations != 1) {
        return fail_at(i, r, where, std::nullopt,
                       "recomputed " + std::to_string(d.recomputations) + " times, not once");
      }
      for (size_t o = 0; o < d.forward.size(); ++o) {
        const std::string output = where + ", output " + std::to_string(o);
        if (d.after_storage_bytes[o] != d.forward_storage_bytes[o] || !d.after[o].defined()) {
          return fail_at(i, r, output, std::nullopt,
                         "its storage holds " + std::to_string(d.after_storage_bytes[o]) + " bytes after the iteration, " +
                             std::to_string(d.forward_storage_bytes[o]) + " after forward");
        }
        if (auto difference = bitwise_difference(d.after[o], d.forward[o])) {
          return fail_at(i, r, output, std::move(difference), "its data after the iteration differs from forward's");
        }
      }
    }
  }
  return Verdict::pass();
}

}  // namespace recheck
