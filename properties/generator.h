// Random cases from RapidCheck generators, so that shrinking comes with them. `recheck run`
// draws from the same generator as the property tests.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/case.h"

namespace recheck {

struct GenOptions {
  int max_depth = 4;        // checkpoints nested at most this deep
  int max_ops = 6;          // ops per segment at most
  int distribute_one_in = 6;  // a checkpoint distributes its saved activations once in this many
  std::string device = "cpu";
};

rc::Gen<Case> gen_case(const GenOptions& options);

// The case that gen_case draws for `seed`: the same seed gives the same case everywhere.
Case draw_case(const GenOptions& options, uint64_t seed);

// The corners of checkpointing a case reaches, as short stable labels ("arg: view",
// "raise in recomputation", "max checkpoint depth 4", ...), each once: what the generator's
// distribution is measured in (tests/generator_test.cpp, the README).
std::vector<std::string> case_features(const Case& c);

// How RapidCheck prints a counterexample: the indented graph.
void showValue(const Case& c, std::ostream& os);

}  // namespace recheck
