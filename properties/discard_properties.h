// The properties of checkpoints without output (Checkpoint::without_output, Discard in
// core/case.h), read from the discard records (core/discards.h): listed in properties().
#pragma once

#include "properties/properties.h"

namespace recheck {

// A discard frees nothing of the caller's but the checkpoint's outputs (and views of them made
// after it): every other tensor of its segment keeps its storage and its data.
Verdict discard_own_outputs(const Observations& subject, const Runs& runs);

// Each output a discard freed is recomputed exactly once by the end of an iteration whose backward
// reached its hook tensor, and then holds its forward's data and dtype in storage of its
// forward's size; never, where backward did not reach the hook.
Verdict discard_recomputed(const Observations& subject, const Runs& runs);

}  // namespace recheck
