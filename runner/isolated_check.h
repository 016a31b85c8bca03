// One case checked in a child process of its own, for a subject whose released function can
// crash the process on cases a caller gets wrong (Subject::cases_may_crash: Megatron's
// CheckpointWithoutOutput reads freed memory when a discarded output is read before its
// recomputation). A crash the oracle makes alone too is the released function's: pre-existing,
// neither a kill nor an alarm.
#pragma once

#include <string>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "properties/properties.h"

namespace recheck::runner {

struct IsolatedCheck {
  bool alarm = false;  // the first alarm of the check, or a crash the oracle alone does not make
  std::string property;
  Classification classification = Classification::pass;
  std::string crash;           // how the check's process ended, when it crashed
  bool oracle_crashes = false;  // the oracle alone crashes on the case too (pre-existing)
  std::string describe() const;  // "grads-bitwise regression", "runs-to-completion crash (...)"
};

IsolatedCheck check_isolated(const Case& c, CheckpointImplementation& oracle, CheckpointImplementation& sut);

}  // namespace recheck::runner
