// The properties of what a checkpoint's body sees and leaves to its user: the is-checkpointing
// flag while the body runs (flag-in-body), and what its stash ops keep after the iteration
// (stash-kept, stash-grads). Listed in properties() with the others.
#pragma once

#include <optional>
#include <string>

#include "properties/properties.h"

namespace recheck {

Verdict flag_in_body(const Observations& subject, const Runs& runs);
Verdict stash_kept(const Observations& subject, const Runs& runs);
Verdict stash_grads(const Observations& subject, const Runs& runs);

// Where the first stash the sut and the oracle keep differently in iteration i holds what eager
// mode's stash there holds (the same data and requires_grad) and the oracle's does not: the
// stash's site; nothing otherwise. Eager mode's stash of a body's input holds the caller's
// tensor, whose values a checkpoint's detached input shares, so on those two it is a judge.
std::optional<std::string> stash_fixed_against_eager(const Observations& eager, const Observations& oracle,
                                                     const Observations& sut, size_t i);

}  // namespace recheck
