// `recheck run`'s session: drawing cases from a seed, checking each (in worker processes, or in
// this process), and recording what it found: every finding, a file for each worth keeping, a
// bucket per cause, a crash classified by whether the oracle makes it alone too, the run over
// time. The command parses the options into a RunPlan and prints the RunRecord; what is said
// while the cases run (the progress lines, each alarm with its replay line) is said here, on
// standard error.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "properties/buckets.h"
#include "properties/generator.h"
#include "properties/properties.h"
#include "properties/report.h"
#include "runner/worker_process.h"

namespace recheck::runner {

// A run over time, for its --json report and the page drawn from it (recheck page): every few
// seconds, how many cases it had checked, its findings, its buckets, and its coverage (the
// generator's corner labels, properties/generator.h's case_features, reached so far).
class RunProgress {
 public:
  void reached(const Case& c);  // a case checked: what it covers
  // A sample at `seconds`, kept when a sample is due (or `last`). At most about a thousand are
  // kept: past that, every other one is dropped and the interval doubles.
  void sample(double seconds, int64_t cases, int64_t findings, int64_t alarms, int64_t buckets, bool last = false);
  size_t coverage() const { return labels_.size(); }
  // [{"seconds", "cases", "findings", "alarms", "buckets", "coverage"}, ...]
  const nlohmann::json& samples() const { return samples_; }

 private:
  std::set<std::string> labels_;
  nlohmann::json samples_ = nlohmann::json::array();
  double every_ = 1;
  double next_ = 0;
};

// What a run checks and how: the command's options, parsed and checked.
struct RunPlan {
  GenOptions gen;
  uint64_t seed = 0;     // case i is drawn from seed + i
  int64_t cases = -1;    // stop after this many cases (-1: no such limit)
  int64_t seconds = -1;  // or after this many seconds (-1: no such limit)
  std::string out_dir;   // where findings' cases are written
  RunOptions run_options;
  EagerRun eager_run = EagerRun::always;
  ClaimChoice claims;
  std::map<std::string, std::string> not_checked;  // properties the run leaves out, and why
  int jobs = 1;          // worker processes
  int64_t threads = 0;   // torch's intra-op threads in the process checking cases (0: torch's choice)
  bool isolate = true;   // false: cases run in this process (--no-isolate)
  bool fresh_process = false;
  // A case still running after this many seconds hangs: its worker is killed and the case is a
  // crash finding (runner/hunt.h). 0: no limit; only where cases run in workers (isolate).
  double case_seconds = kCaseSeconds;
  bool quiet = false;           // no progress lines
  bool track_progress = false;  // record the run over time (RunRecord::progress)
  std::string code_note;      // " | sut code: ..." appended to each finding file's note
  std::string replay_prefix;  // a replay line's start (replay_command)
  std::string replay_suffix;  // its end, after the case file: " --sut A --oracle B" and the rest
};

// What a run found.
struct RunRecord {
  Summary summary;
  // Every alarm, the other findings up to a limit (a campaign of days finds millions, which the
  // buckets count), and the rest only counted.
  nlohmann::json findings = nlohmann::json::array();
  int64_t findings_not_listed = 0;
  Buckets buckets;
  RunProgress progress;
  int64_t op_executions = 0;
  int64_t crashes = 0;
  int64_t pre_existing_crashes = 0;  // crashes the oracle makes alone too
  int64_t eager_skipped = 0;         // cases checked without eager mode (EagerRun::when_needed)
  std::string first_skipped;         // "case N: why", the first case too large for the memory
  std::string failed;                // why the cases stopped before the plan's limits; "" otherwise
  double seconds = 0;                // the cases' time, minimization not included
  // Crashes the oracle does not make: each an alarm.
  int64_t new_crashes() const { return crashes - pre_existing_crashes; }
};

// Checks the plan's cases of `sut` against `oracle` and records what they gave; stops at the
// plan's limits, an interrupt (runner/interrupts.h), or when the cases cannot run (the device, a
// variant: RunRecord::failed says why).
RunRecord run_session(const RunPlan& plan, CheckpointImplementation& oracle, CheckpointImplementation& sut);

}  // namespace recheck::runner
