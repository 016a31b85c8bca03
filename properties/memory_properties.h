// The properties of what a run holds (declared in properties.cpp): the .grad the change lets go
// of, the allocator's floor and peak against the oracle's and eager mode's, and the allocations.
#pragma once

#include <cstddef>

#include "properties/properties.h"

namespace recheck {

Verdict grad_released(const Observations& subject, const Runs& runs);
Verdict memory_floor(const Observations& subject, const Runs& runs);
Verdict no_extra_allocations(const Observations& subject, const Runs& runs);
Verdict memory_eager_floor(const Observations& subject, const Runs& runs);

// Whether a stash kept, past iteration `i`, a tensor with a graph (one that requires grad and is
// no leaf). That graph lives on with what its nodes saved: under a checkpoint whose outputs no
// backward reached, the checkpoint's saved inputs and RNG states, where eager mode's graph keeps
// activations; the two floors then measure different things.
bool keeps_a_graph(const Observations& run, size_t i);

}  // namespace recheck
