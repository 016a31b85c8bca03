// The properties of a run's values (declared in properties.cpp): gradients, outputs and loss,
// recomputations, RNG states, errors and the state left behind, compared with eager mode's run
// or the oracle's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "properties/properties.h"

namespace recheck {

Verdict grads_bitwise(const Observations& subject, const Runs& runs);
Verdict outputs_bitwise(const Observations& subject, const Runs& runs);
Verdict recompute_fidelity(const Observations& subject, const Runs& runs);
Verdict grads_match_eager(const Observations& subject, const Runs& runs);
Verdict rng_restored(const Observations& subject, const Runs& runs);
Verdict errors_match(const Observations& subject, const Runs& runs);
Verdict no_side_effects(const Observations& subject, const Runs& runs);

// Where the states `s` differ from `e`'s, "" when they do not. `seeded`: the tracker states the
// subject's own seeding made (Observations::tracker_seeded), when `s` is a run's and `e` eager
// mode's. The tracker is then judged on what the subject's seeding made: a state eager mode's
// tracker does not keep (a pull request adds one) must still hold its seeded value, since no case
// draws from it; a state eager mode keeps that the subject's seeding never made is not compared
// (the case's draws from it meet an error instead, errors-match's). Without `seeded`, the names
// must be the same on both sides.
std::string rng_difference(const rng::Snapshot& s, const rng::Snapshot& e,
                           const std::map<std::string, std::vector<uint8_t>>* seeded = nullptr);

}  // namespace recheck
