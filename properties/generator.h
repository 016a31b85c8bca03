// Random cases from RapidCheck generators, so that shrinking comes with them. `recheck run`
// draws from the same generator as the property tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/case.h"
#include "suts/subject.h"

namespace recheck {

struct GenOptions {
  int max_depth = 4;        // checkpoints nested at most this deep
  int max_ops = 6;          // ops per segment at most
  int distribute_one_in = 6;  // a checkpoint distributes its saved activations once in this many (0: never)
  std::string device = "cpu";
  // The RNG sources random ops draw from besides the CPU generator's (a variant's RngSources):
  // without the tracker there are no tracker draws and no fork ops.
  bool device_rng = true;
  bool tracker_rng = true;
  // The checkpoint function's own call options, drawn for each checkpoint (a variant's
  // call_options; none for Megatron's).
  std::vector<CallOption> call_options;
  // Checkpoints without output and discards of their outputs (a variant that runs them:
  // CheckpointImplementation::runs_without_output).
  bool without_output = false;
  // ... whose arguments may be None and literals besides tensors
  // (CheckpointImplementation::without_output_takes_non_tensors).
  bool without_output_non_tensors = false;
};

// `options` narrowed to what `sut` runs: its RNG sources, no distributing checkpoint if it cannot
// run one, and the call options it takes.
GenOptions options_for(GenOptions options, const CheckpointImplementation& sut);

rc::Gen<Case> gen_case(const GenOptions& options);

// The case that gen_case draws for `seed`: the same seed gives the same case everywhere.
Case draw_case(const GenOptions& options, uint64_t seed);

// The fuzzer's byte decoder: the same builder as gen_case, its choices read from `data` with
// FuzzedDataProvider instead of drawn by RapidCheck. Total (every byte string decodes to a valid
// case; bytes run out, choices take their first alternative), deterministic, and stable: a
// changed byte changes one choice.
Case decode_case(const uint8_t* data, std::size_t size, const GenOptions& options = {});

// The corners of checkpointing a case reaches, as short stable labels ("arg: view",
// "raise in recomputation", "max checkpoint depth 4", ...), each once: what the generator's
// distribution is measured in (tests/properties/generator_test.cpp, docs/case-format.md).
std::vector<std::string> case_features(const Case& c);

// The synthetic analogue of the PR's measurement (`recheck memory`): `layers` checkpointed
// layers over `streams` residual streams of [seq, hidden]. Each layer is
// `checkpoint(s_1..s_S, W_l){ stash(s_k) for each k; a = tanh(s_1 @ W_l); return s_k + a }`,
// so every layer keeps its (detached, in backward) stream inputs reachable the way a module
// caching its input does. The streams start from one input that requires grad, so each
// stashed stream input holds a [seq, hidden] .grad in the non-clearing function.
struct ResidualStreamOptions {
  int layers = 2;
  int streams = 4;
  int64_t seq = 64;
  int64_t hidden = 32;
  DType dtype = DType::float32;
  int iterations = 2;
  std::string device = "cpu";
};
Case residual_stream_case(const ResidualStreamOptions& options);

// How RapidCheck prints a counterexample: the indented graph.
void showValue(const Case& c, std::ostream& os);

}  // namespace recheck
