// The structural reducer: shrinks a case from any source (a fuzzer's crash file, a JSON case, a
// generated case) while a predicate keeps holding, typically "the same property still fails the
// same way". It drops ops, inlines (flattens) checkpoints and forks, drops checkpoint arguments,
// segment outputs and unused leaves, shrinks shapes, and simplifies dtypes, iterations and
// requires_grad flags; every candidate is validated before the predicate sees it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/case.h"
#include "properties/report.h"

namespace recheck {

struct ReduceStats {
  int candidates = 0;  // valid candidates the predicate was asked about
  int accepted = 0;    // of which it kept
};

// Greedy, to a fixed point: the result is a case on which `still_fails` holds and from which
// no single step of the reducer's keeps it holding. `still_fails(c)` is assumed to hold on entry.
// Once `stop` (when given) returns true, asked before each candidate is built, the reduction
// ends at once with the smallest case kept so far: no further candidate is built or checked.
// Candidates are validated under `limits`: those the case was read under.
Case reduce_case(const Case& c, const std::function<bool(const Case&)>& still_fails, ReduceStats* stats = nullptr,
                 const std::function<bool()>& stop = {}, const Limits& limits = {});

// The same reduction, asking about up to `batch` candidates at a time (the next ones in the
// order the greedy reduction would try them), as workers checking candidates side by side do.
// `still_fail` answers, for each candidate in order, whether it still fails; of a batch, the
// first that does is kept and the rest are dropped, and the reduction goes on from the kept
// one as it would have one candidate at a time. So for a deterministic predicate the result
// is the same for every `batch`: only how many candidates are checked grows with it.
Case reduce_case_batched(const Case& c, int batch,
                         const std::function<std::vector<bool>(const std::vector<Case>&)>& still_fail,
                         ReduceStats* stats = nullptr, const std::function<bool()>& stop = {},
                         const Limits& limits = {});

// What a failing case fails with: a property and how the pair of verdicts is classified.
struct FailureSignature {
  std::string property;
  Classification classification = Classification::pass;
  std::string cause;  // when not empty, the cause signature it must have too (properties/causes.h)
};
// The first alarm (regression or divergence) of a result; with `property`, that property's
// classification when it is not a pass (so a pre-existing finding can be minimized too).
std::optional<FailureSignature> find_alarm(const CaseResult& result, const std::string& property = "");
// True when `result` classifies `signature.property` as `signature.classification`.
bool shows(const CaseResult& result, const FailureSignature& signature);

}  // namespace recheck
