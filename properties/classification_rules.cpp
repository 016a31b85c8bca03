// The bodies of the classification rules of single properties (classification_rules.h), each
// listed by its property's declaration (properties.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "properties/body_state.h"
#include "properties/causes.h"
#include "properties/classification_rules.h"

namespace recheck {

void explain(Verdict& verdict, const std::string& why) {
  verdict.detail += (verdict.detail.empty() ? "" : "; ") + why;
}

std::pair<bool, int64_t> error_progress(const ErrorRecord& e) { return {e.phase == "backward", e.ops_completed}; }

const PropertyResult* RuleContext::result_of(const char* property) const {
  for (const PropertyResult& r : results) {
    if (r.property == property) return &r;
  }
  return nullptr;
}

namespace rules {

bool flag_readings_the_oracle_shares(PropertyResult& r, const RuleContext& context) {
  if (r.classification != Classification::divergent) return false;
  const FlagReadings readings = compare_flag_readings(context.sut, context.oracle);
  if (readings == FlagReadings::differ) return true;
  const bool both_read = readings == FlagReadings::alike;
  r.classification = both_read ? Classification::pre_existing : Classification::unreached;
  explain(r.sut, both_read ? "every reading this run found unset, the oracle found unset too"
                           : "the oracle never made this reading; every other this run found unset, the oracle did too");
  return true;
}

bool errors_both_runs_raise(PropertyResult& r, const RuleContext& context) {
  if (r.oracle.holds || r.sut.holds) return false;
  const std::string oracle_text = r.oracle.describe();
  const size_t unrestored = oracle_text.find(kRngNotRestored);
  if (unrestored != std::string::npos && r.sut.describe().find(kRngNotRestored) == std::string::npos &&
      oracle_text.substr(0, unrestored) == r.sut.describe()) {
    r.classification = Classification::fixed;
    explain(r.sut, "the same error as the oracle's, which alone left the RNG states unrestored");
    return true;
  }
  if (r.classification != Classification::divergent || r.sut.iteration < 0) return true;
  const size_t parted = static_cast<size_t>(r.sut.iteration);
  const std::optional<ErrorRecord> s = first_error_from(context.sut, parted);
  const std::optional<ErrorRecord> o = first_error_from(context.oracle, parted);
  if (s && o && s->iteration == o->iteration && s->error == o->error && error_progress(*s) == error_progress(*o) &&
      r.oracle.iteration >= 0 && r.oracle.iteration < r.sut.iteration) {
    // The oracle failed first, in an earlier iteration (the RNG states its error left, say),
    // which the sut holds; where the sut fails, the oracle raised the same error at the same
    // point: the sut fixed the first failure and shares the second.
    r.classification = Classification::pre_existing;
    explain(r.sut, "where the oracle first fails this run holds, and the oracle raised this error at this point too (after " +
                       std::to_string(s->ops_completed) + " ops of iteration " + std::to_string(s->iteration) + " " +
                       s->phase + ")");
    return true;
  }
  if (!s || !o || s->iteration != o->iteration || s->error == o->error) return true;
  const std::string point = std::to_string(s->ops_completed) + " ops of iteration " + std::to_string(s->iteration) +
                            " " + s->phase;
  if (error_progress(*s) > error_progress(*o)) {
    r.classification = Classification::unreached;
    explain(r.sut, "raised after " + point + ", past the oracle's error (after " + std::to_string(o->ops_completed) +
                       " ops, " + o->phase + "): a point the oracle never reached");
  } else if (error_progress(*s) == error_progress(*o)) {
    r.classification = Classification::pre_existing;
    explain(r.sut, "raised at the point the oracle raised its own (after " + point +
                       "), where eager mode did not: another message for a failure both have");
  }
  return true;
}

bool recomputation_the_oracle_fails_too(PropertyResult& r, const RuleContext& context) {
  if (!(!r.oracle.holds && !r.sut.holds && r.sut.segment_record > r.oracle.segment_record &&
        r.oracle.segment_record >= 0)) {
    return false;
  }
  Observations from_there = context.oracle;
  for (int k = 0; k < r.sut.segment_record; ++k) from_there.segment_calls[static_cast<size_t>(k)].calls.clear();
  const Verdict there = find_property(r.property)->check(from_there, context.runs);
  if (!there.holds && there.segment_record == r.sut.segment_record) {
    r.classification = Classification::pre_existing;
    explain(r.sut, "where the oracle first fails this run holds, and the oracle fails this call too");
  }
  return true;
}

bool a_leak_both_runs_have(PropertyResult& r, const RuleContext& context) {
  if (!(r.classification == Classification::regression && !r.oracle.holds && !r.sut.holds && r.sut.iteration >= 0 &&
        r.sut.iteration == r.oracle.iteration)) {
    return false;
  }
  const size_t i = static_cast<size_t>(r.sut.iteration);
  if (i >= context.sut.iterations.size() || i >= context.oracle.iterations.size()) return false;
  const IterationRecord& mine = context.sut.iterations[i];
  const IterationRecord& theirs = context.oracle.iterations[i];
  if (mine.alive_inputs.empty() && mine.alive_checkpoints.empty()) return false;
  if (mine.alive_checkpoints != theirs.alive_checkpoints || mine.alive_inputs.size() != theirs.alive_inputs.size()) {
    return false;
  }
  for (size_t k = 0; k < mine.alive_inputs.size(); ++k) {
    if (mine.alive_inputs[k].describe() != theirs.alive_inputs[k].describe()) return false;
  }
  std::string what;
  if (!mine.alive_inputs.empty()) what = "recomputation inputs";
  if (!mine.alive_checkpoints.empty()) {
    std::string sites;
    for (const std::string& site : mine.alive_checkpoints) sites += (sites.empty() ? "" : ", ") + site;
    what += (what.empty() ? "" : " and ") + std::string("checkpoint objects (") + sites + ")";
  }
  r.classification = Classification::pre_existing;
  explain(r.sut, "both runs keep the same " + what + " alive past this iteration, held alike: a leak both have; "
                 "how much more the objects it keeps hold (the RNG states each saved, shared with the tracker or not) "
                 "is the leak's, not the change's");
  return true;
}

bool a_stash_both_recomputations_get_wrong(PropertyResult& r, const RuleContext& context) {
  if (r.classification != Classification::regression && r.classification != Classification::divergent) return false;
  const StashPair stashes = stashes_named_by(r.sut, context.oracle, context.sut);
  // The op's number is the case's, whichever run recorded it (the oracle's first run, without
  // a trace, numbered nothing).
  if (stashes.oracle == nullptr || stashes.sut == nullptr || stashes.sut->op < 0) return false;
  if (!(recomputed_from_other_values(context.oracle, stashes.sut->op, r.sut.iteration) &&
        recomputed_from_other_values(context.sut, stashes.sut->op, r.sut.iteration))) {
    return false;
  }
  r.classification = Classification::pre_existing;
  explain(r.sut, "in both runs this stash was last written by a recomputation that got other values than forward gave "
                 "it: each keeps what its own recomputation got wrong, and neither is a reference for the other");
  return true;
}

bool grads_of_another_loss(PropertyResult& r, const RuleContext& context) {
  const PropertyResult* outputs = context.result_of("outputs-bitwise");
  if (!(outputs != nullptr && outputs->classification == Classification::pre_existing &&
        r.sut.iteration >= outputs->sut.iteration)) {
    return false;
  }
  r.classification = Classification::pre_existing;
  explain(r.sut, "both runs' " + outputs->sut.where + " already differs from eager mode's, the same way: the gradients of another loss");
  return true;
}

bool grads_bitwise_where_the_oracle_s_are_not_eager_s(PropertyResult& r, const RuleContext& context) {
  const PropertyResult* match_eager = context.result_of("grads-match-eager");
  if (!(match_eager != nullptr && !match_eager->oracle.holds)) return false;
  r.classification = Classification::pre_existing;
  explain(r.sut, "the oracle's gradients are not eager mode's (grads-match-eager): no reference for these bits");
  return true;
}

bool hooks_bitwise_where_the_oracle_s_are_not_eager_s(PropertyResult& r, const RuleContext& context) {
  const PropertyResult* match_eager = context.result_of("hooks-match-eager");
  if (!(match_eager != nullptr && !match_eager->oracle.holds)) return false;
  if (match_eager->sut.holds) {
    r.classification = Classification::fixed;
    explain(r.sut, "the oracle's hook calls are not eager mode's and this run's are (hooks-match-eager)");
  } else {
    r.classification = Classification::pre_existing;
    explain(r.sut, "the oracle's hook calls are not eager mode's (hooks-match-eager): no reference for these calls");
  }
  return true;
}

bool stash_eager_mode_keeps_as_the_sut_does(PropertyResult& r, const RuleContext& context) {
  if (!(r.oracle.holds && r.sut.iteration >= 0)) return false;
  if (const auto site = stash_fixed_against_eager(context.runs.eager, context.oracle, context.sut,
                                                  static_cast<size_t>(r.sut.iteration))) {
    r.classification = Classification::fixed;
    explain(r.sut, "eager mode's stash at " + *site + " is this run's in what the two differ in, not the oracle's");
  }
  return true;
}

}  // namespace rules

}  // namespace recheck
