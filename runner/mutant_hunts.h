// `recheck mutants`' session: each mutant of a subject hunted from several seeds against its
// oracle, and the control, the subject's correct implementations (its change, each equivalent
// rewrite, each fix) checked on as many cases from every hunt's seed, where any alarm is a false
// alarm of recheck. Hunts and controls are tasks, in worker processes with more than one job
// (runner/pool.h); the answers come back in task order, so that what is made of them does not
// depend on the number of jobs. The command chooses the mutants and prints the table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/checkpoint_interface.h"
#include "properties/generator.h"
#include "suts/subject.h"

namespace recheck::runner {

struct MutantHuntPlan {
  const Subject* subject = nullptr;
  GenOptions gen;           // cases the oracle can run
  int64_t seeds = 10;       // hunts per mutant
  int64_t budget = 200;     // cases per hunt before the mutant counts as survived
  uint64_t first_seed = 1;  // hunt r starts at draw seed first_seed + r * 1000003
  int jobs = 1;             // 1: in this process, one task after another
  uint64_t start_of(int64_t hunt) const { return first_seed + static_cast<uint64_t>(hunt) * 1000003ULL; }
};

// One hunt of one mutant from one seed.
struct HuntRow {
  bool done = false;  // false: not run (interrupted)
  bool killed = false;
  int64_t cases = 0;
  double seconds = 0;
  uint64_t draw_seed = 0;  // of the killing case
  std::string killer;      // "PROPERTY CLASSIFICATION", or the crash that killed it
};

// A mutant's hunts, up to the first not run, and what they add up to.
struct MutantHunts {
  const SubjectImplementation* mutant = nullptr;
  std::vector<HuntRow> hunts;
  int killed = 0;
  std::string killed_by;      // the property (and classification) that killed it most often; "" if none
  double median_cases = 0;    // to kill, a survived hunt counted as budget + 1
  double seconds = 0;
};

// One correct implementation's control: every hunt seed, as many cases as the longest hunt.
struct ControlRow {
  std::string variant;
  int64_t cases = 0;
  int64_t alarms = 0;   // a crash of its worker counts as one
  std::string first;    // the first alarm, "PROPERTY CLASSIFICATION on draw seed N"; ""
};

// Hunts every mutant from every seed. A subject whose cases may crash (Subject::cases_may_crash)
// checks each case in a process of its own, so that a crash the oracle makes too kills nothing.
// Mutants whose hunts were all interrupted are left out.
std::vector<MutantHunts> hunt_mutants(const MutantHuntPlan& plan, const std::vector<const SubjectImplementation*>& mutants,
                                      CheckpointImplementation& oracle);

// The control of `correct` (each of the subject's change, equivalents and fixes), `cases` cases
// from every hunt's seed. Empty when interrupted before it began.
std::vector<ControlRow> control_correct(const MutantHuntPlan& plan, const std::vector<const SubjectImplementation*>& correct,
                                        int64_t cases, CheckpointImplementation& oracle);

}  // namespace recheck::runner
