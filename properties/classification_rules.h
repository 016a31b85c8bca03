// The classification rules of single properties (Property::by_its_records, Property::by_eager),
// named here so that each property's declaration (properties.cpp) lists its own; their bodies
// are in classification_rules.cpp, the rules every property shares in classification.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "properties/properties.h"

namespace recheck {

// What a rule reads: the case's runs and every result of the case.
struct RuleContext {
  const Observations& oracle;
  const Observations& sut;
  const Runs& runs;  // runs.eager is eager mode's run only for by_eager rules
  const std::vector<PropertyResult>& results;
  // The result of the property named, or null where the case has none.
  const PropertyResult* result_of(const char* property) const;
};

// Adds why a verdict was classified as it was to its evidence.
void explain(Verdict& verdict, const std::string& why);
// How far an iteration got when its error was raised: backward after forward, and more ops
// completed after fewer. Two runs' different errors in one iteration are ordered by it.
std::pair<bool, int64_t> error_progress(const ErrorRecord& e);

namespace rules {

// flag-in-body, divergent: the sut reads the flag unset only where the oracle does too
// (pre-existing), or first where the oracle never read (unreached).
bool flag_readings_the_oracle_shares(PropertyResult& r, const RuleContext& context);
// errors-match, both failing: the same error with only the oracle's RNG states unrestored
// (fixed); the oracle first failing earlier and raising this error at this point too
// (pre-existing); the two errors raised at different points (unreached past the oracle's,
// pre-existing at it).
bool errors_both_runs_raise(PropertyResult& r, const RuleContext& context);
// recompute-fidelity, both failing, the sut at a later call: the oracle fails that call too
// (pre-existing).
bool recomputation_the_oracle_fails_too(PropertyResult& r, const RuleContext& context);
// memory-eager-floor, the sut further over eager mode's floor than the oracle in the same
// iteration: both keep the same recomputation inputs and checkpoint objects alive past it, held
// alike (pre-existing).
bool a_leak_both_runs_have(PropertyResult& r, const RuleContext& context);
// grads-bitwise, grads-match-eager: both runs' outputs already differ from eager mode's the same
// way (outputs-bitwise pre-existing): the gradients of another loss (pre-existing).
bool grads_of_another_loss(PropertyResult& r, const RuleContext& context);
// grads-bitwise: the oracle's gradients are not eager mode's (grads-match-eager): no reference
// for these bits (pre-existing).
bool grads_bitwise_where_the_oracle_s_are_not_eager_s(PropertyResult& r, const RuleContext& context);
// hooks-bitwise: the oracle's hook calls are not eager mode's (hooks-match-eager): no reference
// for these calls; fixed where the sut's are eager mode's, else pre-existing (hooks-match-eager
// judges how the two part from eager mode).
bool hooks_bitwise_where_the_oracle_s_are_not_eager_s(PropertyResult& r, const RuleContext& context);
// stash-kept, stash-grads: in both runs the stash op, recomputed, read other values than in
// forward (the traces): each keeps what its recomputation got wrong (pre-existing).
bool a_stash_both_recomputations_get_wrong(PropertyResult& r, const RuleContext& context);
// stash-kept: eager mode's stash is the sut's where the two differ, not the oracle's (fixed).
bool stash_eager_mode_keeps_as_the_sut_does(PropertyResult& r, const RuleContext& context);

}  // namespace rules
}  // namespace recheck
