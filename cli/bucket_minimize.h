// Minimizing the first case of each bucket of a run (properties/buckets.h), after the run, within
// a time budget: the smallest case that still shows the bucket's property, classification and
// cause signature, written beside the run's findings.
#pragma once

#include <string>

#include "core/checkpoint_interface.h"
#include "properties/buckets.h"
#include "properties/generator.h"
#include "properties/properties.h"

namespace recheck::cli {

struct BucketMinimizing {
  const GenOptions& gen;  // the run's cases are draw_case(gen, draw seed)
  CheckpointImplementation& oracle;
  CheckpointImplementation& sut;
  const ClaimChoice& claims;
  std::string out_dir;
  double seconds = 30;  // for all buckets together; each gets an equal share of what is left
  std::string replay_prefix;  // replay_command(sut, oracle)
  std::string replay_suffix;  // " --sut ... --oracle ..." and the claims
};

// Minimizes every bucket with a first case and no minimized case yet, alarms first, and sets
// its minimized file, op count and replay line; a bucket it had no time for keeps its first
// case as the one to replay. Returns how many it minimized. Stops at an interrupt.
int minimize_buckets(Buckets& buckets, const BucketMinimizing& how);

}  // namespace recheck::cli
