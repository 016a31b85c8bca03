// Minimizing the first case of each bucket of a run (properties/buckets.h), after the run, within
// a time budget: the smallest case that still shows the bucket's property, classification and
// cause signature, written beside the run's findings.
#pragma once

#include <functional>
#include <string>

#include "core/checkpoint_interface.h"
#include "properties/buckets.h"
#include "core/case.h"
#include "properties/properties.h"

namespace recheck::runner {

struct BucketMinimizing {
  std::function<Case(const Bucket&)> first_case;  // the case a bucket's first finding was found on
  std::string by;  // the command minimizing, for the note: "recheck run", "recheck triage"
  CheckpointImplementation& oracle;
  CheckpointImplementation& sut;
  const ClaimChoice& claims;
  std::string out_dir;
  // For all buckets together. The alarms come first, each with an equal share of what is left
  // among the alarms still to do (a reviewer reads them; a reduction that ends early leaves its
  // time to the next); the other buckets share what the alarms left.
  double seconds = 30;
  std::string replay_prefix;  // replay_command(sut, oracle)
  std::string replay_suffix;  // " --sut ... --oracle ..." and the claims
  bool alarms_only = false;   // the other buckets keep their first case
};

// Minimizes every bucket with a first case and no minimized case yet, alarms first, and sets
// its minimized file, op count and replay line; a bucket it had no time for keeps its first
// case as the one to replay. Returns how many it minimized. Stops at an interrupt.
int minimize_buckets(Buckets& buckets, const BucketMinimizing& how);

}  // namespace recheck::runner
