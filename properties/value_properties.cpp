// The properties of a run's values, compared with eager mode's or the oracle's: gradients,
// outputs, recomputations, RNG states, errors and the state left behind (declared in
// properties.cpp).
#include "properties/value_properties.h"

#include <algorithm>
#include <climits>
#include <map>
#include <string>

#include "properties/records.h"

namespace recheck {

namespace {

std::string leaf(size_t i) { return "leaf v" + std::to_string(i); }

std::string describe(const compat::AutocastState& state) {
  return std::string(state.enabled ? "enabled, " : "disabled, ") + c10::toString(state.dtype);
}

// Where two autocast states differ, CPU first: "autocast: cpu enabled, BFloat16 vs cpu disabled,
// BFloat16".
Difference autocast_difference(const compat::AutocastStates& subject, const compat::AutocastStates& reference) {
  const bool cpu = !(subject.cpu == reference.cpu);
  const std::string device = cpu ? "cpu " : "cuda ";
  return Difference{"autocast", device + describe(cpu ? subject.cpu : subject.cuda),
                    device + describe(cpu ? reference.cpu : reference.cuda)};
}

}  // namespace

Verdict grads_bitwise(const Observations& subject, const Runs& runs) {
  const Observations& oracle = runs.oracle;
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const IterationRecord& sr = subject.iterations[i];
    if (!comparable(sr, oracle.iterations[i])) continue;
    const auto& s = sr.leaf_grads;
    const auto& o = oracle.iterations[i].leaf_grads;
    for (size_t l = 0; l < s.size() && l < o.size(); ++l) {
      if (auto d = bitwise_difference(s[l], o[l])) return fail_at(i, sr, at_record(i, sr) + ", " + leaf(l) + " .grad", d);
    }
  }
  return Verdict::pass();
}

Verdict outputs_bitwise(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& s = subject.iterations[i];
    const IterationRecord& e = eager.iterations[i];
    if (!completed(s, e)) continue;
    for (size_t o = 0; o < s.outputs.size() && o < e.outputs.size(); ++o) {
      if (auto d = bitwise_difference(s.outputs[o], e.outputs[o])) {
        return Verdict::fail_in(i, at_iteration(i) + ", output " + std::to_string(o), d);
      }
    }
    if (auto d = bitwise_difference(s.loss, e.loss)) return Verdict::fail_in(i, at_iteration(i) + ", loss", d);
  }
  return Verdict::pass();
}

bool recomputes_in_forward_s_autocast_state(const Observations& run) {
  for (const SegmentCall& call : run.segment_calls) {
    for (size_t k = 1; k < call.autocast.size(); ++k) {
      if (call.autocast[k] != call.autocast.front()) return false;
    }
  }
  return true;
}


Verdict recompute_fidelity(const Observations& subject, const Runs&) {
  for (size_t r = 0; r < subject.segment_calls.size(); ++r) {
    const SegmentCall& call = subject.segment_calls[r];
    if (call.calls.empty()) continue;
    const auto& forward = call.calls.front();
    auto fail = [&](size_t k, std::string where, std::optional<Difference> difference, std::string detail) {
      Verdict v = Verdict::fail_in(static_cast<size_t>(call.iteration), std::move(where), std::move(difference), std::move(detail));
      v.segment_record = static_cast<int>(r);
      v.call = static_cast<int>(k);
      return v;
    };
    for (size_t k = 1; k < call.calls.size(); ++k) {
      const auto& recomputed = call.calls[k];
      // The state first: a recomputation under another autocast state computes another graph,
      // even where its outputs happen to match (ops whose results it does not return).
      if (k < call.autocast.size() && call.autocast[k] != call.autocast.front()) {
        return fail(k, call.site + " at " + at_iteration(call.iteration) + ", recomputation vs forward",
                    autocast_difference(call.autocast[k], call.autocast.front()), "");
      }
      if (recomputed.size() != forward.size()) {
        return fail(k, call.site + " at " + at_iteration(call.iteration), std::nullopt,
                    "recomputation returned " + std::to_string(recomputed.size()) + " outputs, forward " +
                        std::to_string(forward.size()));
      }
      for (size_t o = 0; o < forward.size(); ++o) {
        if (auto d = bitwise_difference(recomputed[o], forward[o])) {
          return fail(k, call.site + " at " + at_iteration(call.iteration) + ", recomputed output " + std::to_string(o) + " vs forward",
                      d, "");
        }
      }
    }
  }
  return Verdict::pass();
}

// After an error in forward the leaves' .grad are what the iterations before left, so they are
// compared with eager mode's too. After an error in backward they are not: which gradients the
// engine had accumulated when the error stopped it depends on the order it ran the graph's
// nodes, which checkpointing changes and autograd does not specify (grads-bitwise compares them
// with the oracle's, which runs the same graph).
Verdict grads_match_eager(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& sr = subject.iterations[i];
    if (!comparable(sr, eager.iterations[i]) || (sr.error && sr.error->phase != "forward")) continue;
    const auto& s = sr.leaf_grads;
    const auto& e = eager.iterations[i].leaf_grads;
    for (size_t l = 0; l < s.size() && l < e.size(); ++l) {
      const int64_t bound = e[l].defined() ? grad_ulp_bound(e[l].scalar_type()) : 0;
      if (auto d = scaled_ulp_difference(s[l], e[l], bound)) {
        return fail_at(i, sr, at_record(i, sr) + ", " + leaf(l) + " .grad", d);
      }
    }
  }
  return Verdict::pass();
}

// Where the states `s` differ from `e`'s, "" when they do not. `seeded`: the tracker states the
// subject's own seeding made (Observations::tracker_seeded), when `s` is a run's and `e` eager
// mode's. The tracker is then judged on what the subject's seeding made: a state eager mode's
// tracker does not keep (a pull request adds one) must still hold its seeded value, since no case
// draws from it; a state eager mode keeps that the subject's seeding never made is not compared
// (the case's draws from it meet an error instead, errors-match's). Without `seeded`, the names
// must be the same on both sides.
std::string rng_difference(const rng::Snapshot& s, const rng::Snapshot& e,
                           const std::map<std::string, std::vector<uint8_t>>* seeded) {
  std::string parts;
  auto add = [&](const std::string& part) { parts += (parts.empty() ? "" : ", ") + part; };
  if (s.cpu != e.cpu) add("CPU generator");
  if (s.device != e.device) add("device generator");
  for (const auto& [name, state] : e.tracker) {
    if (seeded != nullptr && seeded->count(name) == 0 && s.tracker.count(name) == 0) continue;
    auto it = s.tracker.find(name);
    if (it == s.tracker.end()) add("tracker state '" + name + "' missing");
    else if (it->second != state) add("tracker state '" + name + "'");
  }
  for (const auto& [name, state] : s.tracker) {
    if (e.tracker.count(name) != 0) continue;
    const auto own = seeded != nullptr ? seeded->find(name) : std::map<std::string, std::vector<uint8_t>>::const_iterator();
    if (seeded == nullptr || own == seeded->end()) add("tracker state '" + name + "' unexpected");
    else if (own->second != state) add("tracker state '" + name + "' (its own, not drawn from by the case) changed since seeding");
  }
  if (seeded != nullptr) {
    for (const auto& [name, state] : *seeded) {
      if (e.tracker.count(name) == 0 && s.tracker.count(name) == 0) add("tracker state '" + name + "' missing");
    }
  }
  // A tracker that keeps no current state name (Megatron before 2026-01) is compared without it.
  if (s.tracker_current_known && e.tracker_current_known && s.tracker_current != e.tracker_current) {
    add("tracker current state '" + s.tracker_current + "' vs '" + e.tracker_current + "'");
  }
  return parts;
}

// The RNG states after an iteration that raised are errors-match's.
Verdict rng_restored(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    if (!completed(subject.iterations[i], eager.iterations[i])) continue;
    const std::string differs =
        rng_difference(subject.iterations[i].rng, eager.iterations[i].rng, &subject.tracker_seeded);
    if (!differs.empty()) return Verdict::fail_in(i, "after " + at_iteration(i), std::nullopt, "differs from eager: " + differs);
  }
  return Verdict::pass();
}

namespace {

std::string describe_error(const std::optional<ErrorRecord>& error) {
  if (!error) return "no error";
  return error->error.type + " in " + at_iteration(error->iteration) + " " + error->phase + ": " +
         error->error.message;
}

}  // namespace

std::optional<ErrorRecord> first_error_from(const Observations& run, size_t from) {
  for (size_t i = from; i < run.iterations.size(); ++i) {
    if (run.iterations[i].error) return run.iterations[i].error;
  }
  return run.iterations.empty() ? run.error : std::nullopt;
}

namespace {

// Two errors (or none) at the point the runs part or meet: eager mode's type and message, at the
// same iteration, leaving eager mode's RNG states. `parted`: the iteration they are judged at.
Verdict compare_errors(const std::optional<ErrorRecord>& s, const std::optional<ErrorRecord>& e, size_t parted,
                       const std::map<std::string, std::vector<uint8_t>>& seeded) {
  // Backward draws no random numbers in eager mode, so an error raised in backward (a failing
  // recomputation) must reach the caller with the states backward began with.
  std::string unrestored;
  if (s && s->phase == "backward") {
    const std::string differs = rng_difference(s->rng, s->rng_at_phase_start);
    if (!differs.empty()) unrestored = kRngNotRestored + differs;
  }
  auto fail = [&](std::string where, std::string detail) {
    Verdict v = Verdict::fail_in(parted, std::move(where), std::nullopt, std::move(detail));
    v.about_the_error = true;
    return v;
  };
  if (!s || !e || !(s->error == e->error) || s->iteration != e->iteration) {
    return fail("error", describe_error(s) + " | eager: " + describe_error(e) + unrestored);
  }
  const std::string differs = rng_difference(s->rng, e->rng, &seeded);
  if (!differs.empty()) return fail("RNG after the error", "differs from eager: " + differs);
  if (!unrestored.empty()) return fail("error", describe_error(s) + unrestored);
  return Verdict::pass();
}
}  // namespace

// Every iteration both runs ran, in order: where one raised, the other raised the same error
// there, leaving the same RNG states. A run that goes on after errors is judged at each.
Verdict errors_match(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  if (subject.iterations.empty() || eager.iterations.empty()) {  // an error before the first iteration
    if (!subject.error && !eager.error) return Verdict::pass();
    const size_t parted = static_cast<size_t>(
        std::min(subject.error ? subject.error->iteration : INT_MAX, eager.error ? eager.error->iteration : INT_MAX));
    return compare_errors(subject.error, eager.error, parted, subject.tracker_seeded);
  }
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& s = subject.iterations[i];
    const IterationRecord& e = eager.iterations[i];
    if (!s.error && !e.error) continue;
    // Where they part, each side is described by its next error: one that stopped its run later
    // is named as the run raised it.
    const Verdict v = compare_errors(s.error ? s.error : first_error_from(subject, i),
                                     e.error ? e.error : first_error_from(eager, i), i, subject.tracker_seeded);
    if (!v.holds) return v;
  }
  return Verdict::pass();
}

// Leaf data, the is-checkpointing flag and the autocast state after every iteration both runs
// ran alike, the state an error left included (Megatron's forward sets the flag and, raising,
// leaves it set).
Verdict no_side_effects(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const IterationRecord& s = subject.iterations[i];
    const IterationRecord& e = eager.iterations[i];
    if (!comparable(s, e)) continue;
    for (size_t l = 0; l < s.leaf_data.size() && l < e.leaf_data.size(); ++l) {
      if (auto d = bitwise_difference(s.leaf_data[l], e.leaf_data[l])) {
        return fail_at(i, s, at_record(i, s) + ", " + leaf(l) + " data", d);
      }
    }
    if (s.checkpointing_flag != e.checkpointing_flag) {
      return fail_at(i, s, "after " + at_record(i, s), std::nullopt,
                     std::string("is-checkpointing flag left ") + (s.checkpointing_flag ? "set" : "unset"));
    }
    if (s.autocast != e.autocast) {
      return fail_at(i, s, "after " + at_record(i, s) + ", autocast state left vs eager mode's",
                     autocast_difference(s.autocast, e.autocast));
    }
  }
  return Verdict::pass();
}


}  // namespace recheck
