// Hunting in a worker process: `recheck run`'s loop over drawn cases, case i after case i-1, in
// a child that an abort or a segmentation fault in a variant ends instead of recheck. When it
// dies, the parent knows the case in progress (a crash finding, or a skipped case where the
// out-of-memory killer ended it) and starts a new worker at the case after it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "properties/report.h"

namespace recheck::runner {

struct HuntOutcome {
  bool finished = false;                // the worker stopped by the run's own limits
  bool started = false;                 // it began at least one case
  std::optional<int64_t> crashed_case;  // the case in progress when it died
  bool killed_for_memory = false;       // by the out-of-memory killer, during crashed_case
  std::string status;                   // how the worker ended (describe_status)
  std::string error;                    // what it said when it stopped on an exception (prepare's, say)
};

struct WorkerHunt {
  // In the worker, before the first case; throws, naming the cause, when the cases cannot run
  // there (the device, a variant): the worker then stops before any case, saying why.
  std::function<void()> prepare;
  // In the worker, before case `index`: whether the run is over (its limits, an interrupt).
  std::function<bool(int64_t index)> should_stop;
  // In the worker: checks case `index`.
  std::function<CaseResult(int64_t index)> check;
  // In this process, as each case's result arrives.
  std::function<void(int64_t index, const CaseResult& result)> handle;
};

// Forks a worker that checks cases from `first` on until should_stop, and hands each result to
// `hunt.handle` here. Returns when the worker ends, saying how.
HuntOutcome hunt_in_worker(int64_t first, const WorkerHunt& hunt);

}  // namespace recheck::runner
