// One case checked in a child process of its own, for a subject whose released function can
// crash the process on cases a caller gets wrong (Subject::cases_may_crash: Megatron's
// CheckpointWithoutOutput reads freed memory when a discarded output is read before its
// recomputation). A crash the oracle makes too (oracle_crash) is the released function's:
// pre-existing, neither a kill nor an alarm.
#pragma once

#include <functional>
#include <string>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "properties/properties.h"
#include "properties/report.h"

namespace recheck::runner {

struct OwnProcessVerdict {
  bool alarm = false;  // the first alarm of the check, or a crash the oracle alone does not make
  std::string property;
  Classification classification = Classification::pass;
  std::string crash;           // how the check's process ended, when it crashed
  bool oracle_crashes = false;  // the oracle alone crashes on the case too (pre-existing)
  std::string describe() const;  // "grads-bitwise regression", "runs-to-completion crash (...)"
};

// The first alarm of checking `c`, in a process of its own, or how that process crashed.
OwnProcessVerdict first_alarm_in_own_process(const Case& c, CheckpointImplementation& oracle,
                                             CheckpointImplementation& sut);

// Whether the released function (the oracle) crashes on a case a variant crashed on: run alone
// in a process of its own (memory not measured), then, if that survives, checked against itself
// as the variant was checked (the same run options, memory measured or not, eager mode and
// claims: reading freed memory crashes or not by what the process allocated and freed before it,
// and by which allocator), up to three times, each in a process of its own. How the process that
// crashed ended ("the worker process running it alone was killed by signal 11 (Segmentation
// fault)"), or "" when none did. `ready` runs first in each process (a command's per-process
// preparation). `case_seconds` > 0: a process still running after that long hangs too, and is
// killed ("... did not end within 300 s and was killed").
std::string oracle_crash(const Case& c, CheckpointImplementation& oracle, const std::function<void()>& ready = {},
                         RunOptions options = {}, EagerRun eager_run = EagerRun::always, const ClaimChoice& claims = {},
                         double case_seconds = 0);

// A variant's crash on a case, classified: the released function's own (pre-existing: reported,
// neither an alarm nor a kill) when the oracle crashes on the case too, the variant's otherwise.
// Every command that meets a crash classifies it here.
struct Crash {
  std::string how;         // "the worker process was killed by signal 11 (Segmentation fault)"
  std::string oracle_end;  // how the oracle's process ended on the case (oracle_crash); "" when it did not crash
  bool pre_existing() const { return !oracle_end.empty(); }
  std::string signature() const;  // its bucket (properties/causes.h, crash_signature)
};
// `how` the variant's process ended on `c`; the rest as for oracle_crash.
Crash classify_crash(const Case& c, std::string how, CheckpointImplementation& oracle,
                     const std::function<void()>& ready = {}, RunOptions options = {},
                     EagerRun eager_run = EagerRun::always, const ClaimChoice& claims = {},
                     double case_seconds = 0);

}  // namespace recheck::runner
