// Checking one case at a time in a worker process (runner/worker_process.h), as `run` checks
// its cases: an abort or a segmentation fault inside a variant is reported, not suffered, and a
// worker the out-of-memory killer ends is a skipped case. `repro`, `replay` and `minimize` use
// it; `minimize` sends it every candidate, so a candidate that crashes costs a worker and not
// the minimization so far. The device and variant checks run in the worker too: the parent
// never starts CUDA, which a child forked after it could not use (docs/architecture.md, "Note:
// CUDA and fork").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "properties/corpus.h"
#include "properties/report.h"
#include "runner/worker_process.h"

namespace recheck::runner {

// The result of a case whose check process the out-of-memory killer ended: skipped, saying so.
CaseResult skipped_for_memory();

// A case on `device` needs a device that works in this process (and variants ready for it):
// throws CaseError with the cause, naming `file`, before anything runs.
void check_can_run(const std::string& device, const std::string& file, const CheckpointImplementation& oracle,
                   const CheckpointImplementation& sut);

// Empty when `device` is available to this build and machine, else why not. CUDA is asked in a
// child process, once: CUDA started in this process could not be used by a worker forked after it.
std::string device_missing(const std::string& device);

// What checking one case in a process of its own gave: the result, or how the process died.
struct IsolatedCheck {
  std::optional<CaseResult> result;
  std::string crash;  // "the check process was killed by signal 6 (Aborted)" when it died
  bool hung = false;  // it was killed for running past its time (CaseWorker::limit_case_seconds)
};

class CaseWorker {
 public:
  // `device`: the device of the cases it will check (the candidates of one minimization share
  // it); `file`: the case's file, named in errors.
  CaseWorker(const std::string& file, const std::string& device, CheckpointImplementation& oracle,
             CheckpointImplementation& sut, Limits limits)
      : file_(file), device_(device), oracle_(oracle), sut_(sut), limits_(limits) {}

  // Holds every check to a share of the machine, for `jobs` workers side by side: on CPU each
  // run to the available memory's share (an allocation beyond it raises the out-of-memory error
  // that skips a case), on CUDA the worker to its fraction of the device's memory. Before the
  // first check.
  void hold_to_share(int jobs);
  // Holds the sut to these of the change's claims (recheck run --claims). Before the first check.
  void hold_to_claims(const ClaimChoice& claims) { claims_ = claims; }
  // A check still running after `seconds` hangs (a deadlock, an endless loop): the worker is
  // killed and the check is a crash ("... did not finish the case within 300 s and was
  // killed"). 0: no limit. Default: 300 s, as `recheck run --case-seconds`.
  void limit_case_seconds(double seconds) { case_seconds_ = seconds; }

  // The result, or how the worker died checking `c`. Throws CaseError when the case cannot run
  // here (no device, a variant that cannot start) or the check stopped on an error. A worker
  // found dead before it was sent the case (killed while idle) is replaced once.
  IsolatedCheck check(const Case& c);
  // The same in two halves, for a parent keeping several workers busy at once: `send` hands the
  // worker `c` (starting it when it is not running) and `receive` waits for what it gave.
  void send(const Case& c);
  IsolatedCheck receive();
  // Ends the worker (it stops at the end of its input) and says how it ended; "" if none ran.
  std::string stop() { return process_.stop(); }

 private:
  void start();

  std::string file_;
  std::string device_;
  CheckpointImplementation& oracle_;
  CheckpointImplementation& sut_;
  Limits limits_;
  WorkerProcess process_;
  RunOptions options_;
  ClaimChoice claims_;
  double device_fraction_ = 1.0;
  int64_t kills_before_ = 0;  // the out-of-memory kills counted when the case in progress was sent
  double case_seconds_ = kCaseSeconds;
};

// Checks `c` in a process of its own. Throws CaseError when the case cannot run there.
// `case_seconds`: as CaseWorker::limit_case_seconds.
IsolatedCheck check_isolated(const Case& c, const std::string& file, CheckpointImplementation& oracle,
                             CheckpointImplementation& sut, const Limits& limits = {}, const ClaimChoice& claims = {},
                             double case_seconds = kCaseSeconds);

}  // namespace recheck::runner
