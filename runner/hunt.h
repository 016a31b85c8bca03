// Hunting in worker processes: `recheck run`'s loop over drawn cases, in children that an abort
// or a segmentation fault in a variant ends instead of recheck. With N jobs, worker j checks
// cases j, j + N, j + 2N, ... (each case once, whatever N), and the results are handed on here
// in case order, so that a report is the same for every N. When a worker dies, the case it was
// checking is reported lost (a crash finding, or a skipped case where the out-of-memory killer
// ended it) and a new worker goes on from its next case.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "properties/report.h"

namespace recheck::runner {

// A case whose worker died in it (no result came back).
struct CaseLost {
  bool killed_for_memory = false;  // by the out-of-memory killer
  bool hung = false;               // killed by the hunt: it ran past WorkerHunt::case_seconds
  std::string status;              // how the worker ended (describe_status), or that it hung
  std::string error;               // what it said when an exception ended it in the case
};

struct WorkerHunt {
  // In each worker, before its first case; throws, naming the cause, when the cases cannot run
  // there (the device, a variant): the hunt then stops, saying why.
  std::function<void()> prepare;
  // In a worker before case `index`, and here before a new worker is started at `index`: whether
  // the run is over (its limits, an interrupt).
  std::function<bool(int64_t index)> should_stop;
  // In a worker: checks case `index`.
  std::function<CaseResult(int64_t index)> check;
  // Here, in case order: a case's result, or how its worker died in it.
  std::function<void(int64_t index, const CaseResult& result)> handle;
  std::function<void(int64_t index, const CaseLost& lost)> lost;
  // Each case checked in a fresh fork of its worker, which has imported the code under test and
  // called nothing (`prepare` runs in each fork, after a trial run in a fork of its own): what a case leaves in the process (a first-call flag, a cache,
  // a global tracker's states, the is-checkpointing flag) reaches no later case. A crash or an
  // out-of-memory kill of that fork ends the worker the same way, so it is reported as before.
  bool fresh_process_per_case = false;
  // A case still running after this many seconds hangs (a deadlock, an endless loop): its
  // worker is killed, the case reported lost (CaseLost::hung), and a new worker goes on from the
  // next. 0: no limit.
  double case_seconds = 0;
};

struct HuntOutcome {
  // Empty when every worker stopped by the run's own limits or an interrupt; otherwise why the
  // hunt stopped early ("the worker could not start (exited with status 3): no CUDA device").
  std::string failed;
};

// Checks cases from 0 on in `jobs` worker processes until should_stop, and hands every result
// and every lost case to `hunt` here, in case order. Returns when all workers have ended. An
// interrupt (runner/interrupts.h) reaches every worker; a case a worker was killed in after it
// is left out, neither handled nor lost.
HuntOutcome hunt_in_workers(int jobs, const WorkerHunt& hunt);

}  // namespace recheck::runner
