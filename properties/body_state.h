// The properties of what a checkpoint's body sees and leaves to its user: the is-checkpointing
// flag while the body runs (flag-in-body), and what its stash ops keep after the iteration
// (stash-kept, stash-grads). Listed in properties() with the others.
#pragma once

#include <optional>
#include <string>

#include "properties/properties.h"

namespace recheck {

Verdict flag_in_body(const Observations& subject, const Runs& runs);
// How the readings of the flag `run` found unset fare in `reference`, the same reading of the
// same checkpoint call (its iteration, site and execution): `differ` when `reference` found one
// of them set; otherwise they fail alike wherever both read, and `alike_first_unread` says that
// `run`'s first unset reading is one `reference` never made (it raised before). flag-in-body
// failing both ways, the pair is then pre-existing (or unreached), however differently their
// first failures read.
enum class FlagReadings { differ, alike, alike_first_unread };
FlagReadings compare_flag_readings(const Observations& run, const Observations& reference);
Verdict stash_kept(const Observations& subject, const Runs& runs);
Verdict stash_grads(const Observations& subject, const Runs& runs);

// Where, at the first stash the sut and the oracle keep differently in iteration i, eager mode's
// stash there is the sut's in the first thing the two differ in (requires_grad, the data's dtype
// and shape, its values, ...) and not the oracle's: the stash's site; nothing otherwise. Eager
// mode's stash of a body's input holds the caller's tensor, whose values a checkpoint's
// detached input shares: on what a checkpoint must not change it is a judge.
std::optional<std::string> stash_fixed_against_eager(const Observations& eager, const Observations& oracle,
                                                     const Observations& sut, size_t i);

// The stash op a failing stash-kept or stash-grads verdict names (its site in `verdict.where`),
// as each run recorded it after the verdict's iteration; null where a run kept none there.
struct StashPair {
  const StashRecord* oracle = nullptr;
  const StashRecord* sut = nullptr;
};
StashPair stashes_named_by(const Verdict& verdict, const Observations& oracle, const Observations& sut);

}  // namespace recheck
