// What the generator draws after a case's graph, so that the graph is the one drawn without it:
// a loop that goes on after an error, autocast regions (around the forward, inside a
// checkpoint's body), and hooks on its tensors.
#pragma once

#include "core/case.h"

namespace recheck {

// Draws the decorations of `c`, whose graph is built (choices.h: RapidCheck, a fuzzer's bytes
// or the case seed's generator, as for the graph).
void draw_decorations(Case& c);

}  // namespace recheck
