// Checking one case end to end (eager, oracle and sut runs, then every property), and the
// summary of many: the counts per property and classification, the table and the JSON report.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/case.h"
#include "core/logged.h"
#include "properties/generator.h"
#include "properties/properties.h"

namespace recheck {

struct CaseResult {
  std::vector<PropertyResult> results;
  int64_t op_executions = 0;  // over the three runs
  // Set when a run ran out of memory: the case is too large for the device (or the CPU
  // budget), so no property was checked. Not a failure.
  std::string skipped;
  // What the code under test logged while the case ran (core/logged.h), counted.
  LoggedCounts logged;
  // Whether eager mode ran (EagerRun::when_needed leaves it out where the oracle and the sut agree;
  // the properties reading it are then not among the results).
  bool eager_ran = true;
  bool has_alarm() const;
  const PropertyResult* first_alarm() const;  // the first regression or divergence; null when none
};

// When check_case runs eager mode. `always`: first, for every case. `when_needed`: after the
// oracle and the sut, only when they do not agree_for_eager (properties/properties.h); when they
// agree, no property that reads eager mode can raise an alarm, and those properties are left out
// of the results. For the fuzz target, which looks for alarms only: a third of each check saved.
// A case with an alarm among the other properties is checked again with eager mode, so its result
// is the one `always` gives (all properties, or skipped if eager mode runs out of memory), the one
// `recheck repro` prints.
enum class EagerRun { always, when_needed };

// `claims`: which of the change's claims the sut is held to (properties/properties.h).
CaseResult check_case(const Case& c, CheckpointImplementation& oracle, CheckpointImplementation& sut,
                      const RunOptions& options = {}, EagerRun eager_run = EagerRun::always,
                      const ClaimChoice& claims = {});

// Hunting a mutant: generated cases from `first_seed` on (case i uses draw seed first_seed + i)
// until one shows a regression or a divergence, or the budget is spent.
struct Hunt {
  bool killed = false;
  int64_t cases = 0;        // cases checked, the killing one included
  uint64_t draw_seed = 0;   // of the killing case
  std::string property;     // the first property that raised the alarm
  Classification classification = Classification::pass;
  double seconds = 0;
};

Hunt hunt(CheckpointImplementation& oracle, CheckpointImplementation& mutant, const GenOptions& options,
          uint64_t first_seed, int64_t budget);

// Whether autograd adopts the gradient that `variant`'s backward returns for a leaf argument
// as the leaf's .grad (no copy), when the body keeps its (detached) input alive past backward:
// it may once the detached input no longer holds that gradient. Measured on the running
// libtorch, on CPU.
bool leaf_adopts_returned_gradient(const std::string& variant);

// Prints each property's verdicts and evidence, one block per property.
std::string describe_results(const std::vector<PropertyResult>& results);

constexpr size_t kClassificationCount = 6;

class Summary {
 public:
  void add(const CaseResult& result);
  int64_t cases() const { return cases_; }
  int64_t skipped() const { return skipped_; }
  int64_t count(Classification c) const;
  int64_t alarms() const { return count(Classification::regression) + count(Classification::divergent); }
  std::string table() const;
  nlohmann::json to_json() const;
  // What the code under test logged over all the cases added.
  const LoggedCounts& logged() const { return logged_; }
  // A property this run does not check at all, and why: its row in the table and the JSON says
  // so instead of a row of zeros that reads like "checked, always passed".
  void not_checked(const std::string& property, std::string reason) { not_checked_[property] = std::move(reason); }
  // The run checks a run of `sut`: the table and the JSON list the properties of its subject
  // (subject_for), no others. Unsaid, the default subject's.
  void checks(const std::string& sut) { sut_ = sut; }

 private:
  bool listed(const Property& property) const;
  int64_t cases_ = 0;
  int64_t skipped_ = 0;
  LoggedCounts logged_;
  std::map<std::string, std::array<int64_t, kClassificationCount>> counts_;
  std::map<std::string, std::string> not_checked_;
  std::string sut_;
};

// The properties a run of `sut` against `oracle` under `claims` leaves out whatever its cases,
// with the reason for each: the claims not held, allocations between different code.
std::map<std::string, std::string> properties_not_checked(const CheckpointImplementation& oracle,
                                                         const CheckpointImplementation& sut, const ClaimChoice& claims);

// The end of a run's report: how many messages the code under test logged, and each message with
// its count; "" when none.
std::string logged_summary(const LoggedCounts& logged);

}  // namespace recheck
