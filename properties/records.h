// Reading two runs' records side by side: which iterations both ran and can be compared, and how
// a failure in them is named. Shared by the property checks (properties.cpp, body_state.cpp).
#pragma once

#include <algorithm>
#include <optional>
#include <string>

#include "properties/properties.h"

namespace recheck {

inline std::string at_iteration(size_t i) { return "iteration " + std::to_string(i); }

// Two runs that stopped after a different number of iterations are told apart by errors-match;
// the tensor properties compare the iterations both ran.
inline size_t common_iterations(const Observations& a, const Observations& b) {
  return std::min(a.iterations.size(), b.iterations.size());
}

// Both runs completed iteration i.
inline bool completed(const IterationRecord& a, const IterationRecord& b) { return !a.error && !b.error; }

// Iteration i of two runs can be compared: both completed it, or both raised the same error in
// the same phase of it, and then what is compared is the state the error left. Runs that part
// there are errors-match's to judge.
inline bool comparable(const IterationRecord& a, const IterationRecord& b) {
  if (completed(a, b)) return true;
  return a.error && b.error && a.error->phase == b.error->phase && a.error->error == b.error->error;
}

// "iteration 1", or "iteration 1 (after its error)" for the state an error left.
inline std::string at_record(size_t i, const IterationRecord& r) {
  return at_iteration(i) + (r.error ? " (after its error)" : "");
}

// A failure in the records of iteration i, which may be the state an error left.
inline Verdict fail_at(size_t i, const IterationRecord& r, std::string where, std::optional<Difference> difference,
                       std::string detail = "") {
  Verdict v = Verdict::fail_in(i, std::move(where), std::move(difference), std::move(detail));
  v.after_error = r.error.has_value();
  return v;
}

}  // namespace recheck
