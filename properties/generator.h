// Random cases from RapidCheck generators, so that shrinking comes with them. `recheck run`
// draws from the same generator as the property tests.
#pragma once

#include <cstdint>
#include <string>

#include <rapidcheck.h>

#include "core/case.h"

namespace recheck {

struct GenOptions {
  int max_depth = 3;        // checkpoints nested at most this deep
  int max_ops = 6;          // ops per segment at most
  std::string device = "cpu";
};

rc::Gen<Case> gen_case(const GenOptions& options);

// The case that gen_case draws for `seed`: the same seed gives the same case everywhere.
Case draw_case(const GenOptions& options, uint64_t seed);

}  // namespace recheck
