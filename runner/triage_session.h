// `recheck triage`'s session: each input read (a run's or a triage's report, whose buckets are
// merged as they are; a case or a fuzzer's crash file, checked against the oracle in a worker
// process), every finding counted in its cause's bucket, a crash classified by whether the
// oracle makes it too, an input that cannot be read counted as incomplete. The command finds the
// inputs, minimizes the buckets and prints them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/checkpoint_interface.h"
#include "properties/buckets.h"
#include "properties/properties.h"

namespace recheck::runner {

struct TriagedInputs {
  Buckets buckets;
  nlohmann::json inputs = nlohmann::json::array();  // per input: its file, kind and what it gave
  int64_t cases = 0;
  int64_t reports = 0;
  int64_t incomplete = 0;
  int64_t findings = 0;
};

// Triages `files` in order until an interrupt; `load_case` reads a case file or a fuzzer's input
// (throwing CaseError for one that is not), `limits` hold the worker's checks.
TriagedInputs triage_inputs(const std::vector<std::string>& files,
                            const std::function<Case(const std::string& file)>& load_case, const Limits& limits,
                            CheckpointImplementation& oracle, CheckpointImplementation& sut, const ClaimChoice& claims);

}  // namespace recheck::runner
