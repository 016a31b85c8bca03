#include "properties/properties.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <map>
#include <stdexcept>

#include "properties/body_state.h"
#include "properties/discard_properties.h"
#include "properties/records.h"
#include "suts/subject.h"

namespace recheck {

const char* const kRngNotRestored = "; RNG not restored when the error reached the caller: ";

Verdict Verdict::fail(std::string where, std::optional<Difference> difference, std::string detail) {
  Verdict v;
  v.holds = false;
  v.where = std::move(where);
  v.difference = std::move(difference);
  v.detail = std::move(detail);
  return v;
}

Verdict Verdict::fail_in(size_t i, std::string where, std::optional<Difference> difference, std::string detail) {
  Verdict v = fail(std::move(where), std::move(difference), std::move(detail));
  v.iteration = static_cast<int>(i);
  return v;
}

std::string Verdict::describe() const {
  if (holds) return "";
  std::string text = where;
  if (difference) text += ": " + difference->describe();
  if (!detail.empty()) text += (text.empty() ? "" : ": ") + detail;
  return text;
}

namespace {


std::string leaf(size_t i) { return "leaf v" + std::to_string(i); }

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

bool recomputes_in_forward_s_autocast_state(const Observations& run) {
  for (const SegmentCall& call : run.segment_calls) {
    for (size_t k = 1; k < call.autocast.size(); ++k) {
      if (call.autocast[k] != call.autocast.front()) return false;
    }
  }
  return true;
}

namespace {

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
                           const std::map<std::string, std::vector<uint8_t>>* seeded = nullptr) {
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

// After an error, only the inputs of checkpoint calls whose backward returned are listed
// (core/interpreter.h): the change clears what backward collected.
Verdict grad_released(const Observations& subject, const Runs&) {
  for (size_t i = 0; i < subject.iterations.size(); ++i) {
    const IterationRecord& r = subject.iterations[i];
    const auto& held = r.detached_inputs_holding_grad;
    if (!held.empty()) {
      return fail_at(i, r, "after " + at_record(i, r), std::nullopt,
                     std::to_string(held.size()) + " recomputation input(s) still hold a .grad, first " + held.front());
    }
    const auto& elsewhere = r.gradients_held_elsewhere;
    if (!elsewhere.empty()) {
      return fail_at(i, r, "after " + at_record(i, r), std::nullopt,
                     std::to_string(elsewhere.size()) + " gradient(s) not freed, first " + elsewhere.front());
    }
  }
  return Verdict::pass();
}

std::string bytes(int64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

// The floor: at most the oracle's, and below it by exactly what letting go of the oracle's
// recomputation inputs' .grad frees (measured in the oracle's run, core/interpreter.h); the
// peak: at most the oracle's. To the byte on both devices: on CUDA the bytes each allocation
// asked for, from the caching allocator's trace (its rounded statistics on libtorch before 2.1),
// the same on both sides.
// The recomputation inputs alive, and what kept each: the first `shown`, then how many in all.
std::string list_alive(const std::vector<AliveInput>& alive, size_t shown) {
  std::string text;
  for (size_t k = 0; k < alive.size() && k < shown; ++k) text += (k ? "; " : "") + alive[k].describe();
  if (alive.size() > shown) text += "; ... (" + std::to_string(alive.size()) + " in all)";
  return text;
}

// Who held the bytes: the recomputation inputs alive after iteration `i` of both runs, and
// what kept each (a memory finding's evidence).
std::string holders_after(size_t i, const Observations& subject, const Observations& oracle) {
  std::string text;
  for (const auto& [run, name] : {std::pair{&subject, "this run"}, std::pair{&oracle, "the oracle"}}) {
    const std::vector<AliveInput>& alive = run->iterations[i].alive_inputs;
    text += std::string("; recomputation inputs alive in ") + name + ": " + (alive.empty() ? "none" : list_alive(alive, 3));
  }
  return text;
}

Verdict memory_floor(const Observations& subject, const Runs& runs) {
  const Observations& oracle = runs.oracle;
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const MemoryRecord& s = subject.iterations[i].memory;
    const MemoryRecord& o = oracle.iterations[i].memory;
    if (!s.measured || !o.measured) continue;
    const std::string at = "after " + at_iteration(i);
    if (s.floor > o.floor) {
      return Verdict::fail_in(i, at, std::nullopt, "floor " + std::to_string(s.floor) + " bytes, above the oracle's " +
                                                       std::to_string(o.floor) + holders_after(i, subject, oracle));
    }
    const int64_t freed = o.floor - s.floor;
    if (freed != o.released_bytes) {
      return Verdict::fail_in(i, at, std::nullopt,
                              "floor " + bytes(freed) + " below the oracle's, predicted " + std::to_string(o.released_bytes) +
                                  " (what letting go of the .grad of its " + std::to_string(o.released_grads) +
                                  " live recomputation inputs frees)" + holders_after(i, subject, oracle));
    }
    if (s.peak > o.peak) {
      return Verdict::fail_in(i, "during " + at_iteration(i), std::nullopt,
                              "peak " + std::to_string(s.peak) + " bytes, above the oracle's " + std::to_string(o.peak));
    }
  }
  return Verdict::pass();
}

// Whether a stash kept, past iteration `i`, a tensor with a graph (one that requires grad and is
// no leaf). That graph lives on with what its nodes saved: under a checkpoint whose outputs no
// backward reached, the checkpoint's saved inputs and RNG states, where eager mode's graph keeps
// activations; the two floors then measure different things.
bool keeps_a_graph(const Observations& run, size_t i) {
  for (const StashRecord& stash : run.iterations[i].stashed) {
    if (stash.tensor && stash.requires_grad && !stash.is_leaf) return true;
  }
  return false;
}

// After each iteration, no more held than eager mode holds after it: whatever checkpointing
// stored, recomputed or collected is let go once the iteration's graph is, so the floor is what
// the same ops leave without a checkpoint (leaves, their .grad, what bodies stash). To the byte,
// as memory-floor measures. Not compared after an iteration where a stash keeps a graph alive in
// either run (keeps_a_graph). A subject whose function may keep more says so by not listing it.
Verdict memory_eager_floor(const Observations& subject, const Runs& runs) {
  const Observations& eager = runs.eager;
  for (size_t i = 0; i < common_iterations(subject, eager); ++i) {
    const MemoryRecord& s = subject.iterations[i].memory;
    const MemoryRecord& e = eager.iterations[i].memory;
    if (!s.measured || !e.measured || s.floor <= e.floor) continue;
    if (keeps_a_graph(subject, i) || keeps_a_graph(eager, i)) continue;
    const std::vector<AliveInput>& inputs = subject.iterations[i].alive_inputs;
    const std::string alive = inputs.empty() ? "" : "; recomputation inputs alive: " + list_alive(inputs, inputs.size());
    Verdict verdict = Verdict::fail_in(i, "after " + at_iteration(i), std::nullopt,
                                       "floor " + std::to_string(s.floor) + " bytes, " + bytes(s.floor - e.floor) +
                                           " above eager mode's " + std::to_string(e.floor) + alive);
    verdict.excess = s.floor - e.floor;
    return verdict;
  }
  return Verdict::pass();
}

// What `sizes` holds beyond `allowed` (both ascending), as a multiset.
std::vector<int64_t> beyond(const std::vector<int64_t>& sizes, const std::vector<int64_t>& allowed) {
  std::vector<int64_t> extra;
  std::set_difference(sizes.begin(), sizes.end(), allowed.begin(), allowed.end(), std::back_inserter(extra));
  return extra;
}

std::string list_sizes(const std::vector<int64_t>& sizes) {
  std::string text;
  const size_t shown = std::min<size_t>(sizes.size(), 4);
  for (size_t k = 0; k < shown; ++k) text += (k ? ", " : "") + std::to_string(sizes[k]);
  if (sizes.size() > shown) text += ", ... (" + std::to_string(sizes.size()) + " in all)";
  return text;
}

// Every allocation the subject makes, the oracle makes too, in the same scope: per checkpoint
// forward, checkpoint backward and outside checkpoints, the subject's sizes are a sub-multiset
// of the oracle's. The change may only free earlier, which lets autograd adopt a gradient it
// would otherwise copy, or add in place where it would make a sum: fewer allocations, never more.
Verdict no_extra_allocations(const Observations& subject, const Runs& runs) {
  const Observations& oracle = runs.oracle;
  static const std::vector<int64_t> none;
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const AllocationRecord& s = subject.iterations[i].allocations;
    const AllocationRecord& o = oracle.iterations[i].allocations;
    if (!s.measured || !o.measured) continue;
    for (const auto& [scope, sizes] : s.by_scope) {
      const auto found = o.by_scope.find(scope);
      const std::vector<int64_t>& allowed = found == o.by_scope.end() ? none : found->second;
      const std::vector<int64_t> extra = beyond(sizes, allowed);
      if (extra.empty()) continue;
      return Verdict::fail_in(i, at_iteration(i) + ", " + scope, std::nullopt,
                              std::to_string(extra.size()) + " allocation(s) the oracle does not make (bytes: " +
                                  list_sizes(extra) + "); " + std::to_string(sizes.size()) + " allocations, the oracle's " +
                                  std::to_string(allowed.size()));
    }
  }
  return Verdict::pass();
}

}  // namespace

const std::vector<Property>& properties() {
  static const std::vector<Property> all = {
      {"grads-bitwise", "every leaf's .grad after each iteration is bitwise equal to the oracle's", grads_bitwise,
       /*claim_of_change=*/false, /*reads_eager=*/false, /*same_code_only=*/false, /*compares_with_oracle=*/true},
      {"outputs-bitwise", "forward outputs and the loss are bitwise equal to eager mode's", outputs_bitwise,
       /*claim_of_change=*/false, /*reads_eager=*/true},
      {"recompute-fidelity", "each checkpointed segment's recomputed outputs equal its forward outputs bitwise",
       recompute_fidelity},
      {"grads-match-eager", "gradients match eager mode within the documented ulp bound", grads_match_eager,
       /*claim_of_change=*/false, /*reads_eager=*/true},
      {"rng-restored", "after every iteration the CPU, device and tracker states equal eager mode's", rng_restored,
       /*claim_of_change=*/false, /*reads_eager=*/true},
      {"errors-match", "errors have eager mode's type and message, and leave eager mode's RNG states", errors_match,
       /*claim_of_change=*/false, /*reads_eager=*/true},
      {"no-side-effects", "leaf data, the is-checkpointing flag and the autocast state are as eager mode leaves them, after an "
       "error too",
       no_side_effects,
       /*claim_of_change=*/false, /*reads_eager=*/true},
      {"flag-in-body", "is_checkpointing() reads set wherever a checkpoint's body runs, in forward and in recomputation",
       flag_in_body, /*claim_of_change=*/false, /*reads_eager=*/false, /*same_code_only=*/false,
       /*compares_with_oracle=*/false, /*reads_checkpointing_flag=*/true},
      {"stash-kept", "what a body stashes is, after the iteration, the oracle's: requires_grad, is_leaf, data and version",
       stash_kept, /*claim_of_change=*/false, /*reads_eager=*/false, /*same_code_only=*/false,
       /*compares_with_oracle=*/true},
      {"stash-grads", "what a body stashes holds, after the iteration, the oracle's .grad (unless grad-released is held)",
       stash_grads, /*claim_of_change=*/false, /*reads_eager=*/false, /*same_code_only=*/false,
       /*compares_with_oracle=*/true, /*reads_checkpointing_flag=*/false, /*yields_to_claim=*/"grad-released"},
      {"grad-released", "after backward no recomputation input still alive holds a .grad (a claim of the change)",
       grad_released, /*claim_of_change=*/true},
      {"memory-floor",
       "floor <= the oracle's, below it by exactly the .grad bytes of stashed recomputation inputs; peak <= the "
       "oracle's (a claim of the change)",
       memory_floor, /*claim_of_change=*/true, /*reads_eager=*/false, /*same_code_only=*/false,
       /*compares_with_oracle=*/true},
      {"no-extra-allocations",
       "every allocation, in each checkpoint forward, checkpoint backward and outside checkpoints, is one the "
       "oracle makes there too (a claim of the change)",
       no_extra_allocations, /*claim_of_change=*/true, /*reads_eager=*/false, /*same_code_only=*/true,
       /*compares_with_oracle=*/true},
      {"memory-eager-floor",
       "after each iteration the floor is no higher than eager mode's: nothing checkpointing stored, recomputed or "
       "collected outlives backward",
       memory_eager_floor, /*claim_of_change=*/false, /*reads_eager=*/true},
      {"discard-own-outputs",
       "a discard frees and changes nothing of the caller's but the checkpoint's outputs (and views of them made "
       "after it)",
       discard_own_outputs},
      {"discard-recomputed",
       "each output a discard freed is recomputed exactly once where backward reached its hook, and after the "
       "iteration holds its forward's data, dtype and storage size",
       discard_recomputed},
  };
  return all;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : properties()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

namespace {

bool same_tensors(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (bitwise_difference(a[i], b[i])) return false;
  }
  return true;
}

bool same_rng(const rng::Snapshot& a, const rng::Snapshot& b) { return rng_difference(a, b).empty(); }

bool same_error(const ErrorRecord& x, const ErrorRecord& y) {
  return x.iteration == y.iteration && x.phase == y.phase && x.error == y.error && same_rng(x.rng, y.rng) &&
         same_rng(x.rng_at_phase_start, y.rng_at_phase_start);
}

}  // namespace

namespace {

// What a property that compares a run with eager mode's reads of that run's observations,
// besides how many iterations ran and which of them raised (every one reads those).
enum Read : unsigned {
  kOutputs = 1u << 0,        // each iteration's outputs
  kLoss = 1u << 1,           // and its loss
  kLeafGrads = 1u << 2,      // the leaves' .grad after it
  kLeafData = 1u << 3,       // the leaves' data after it
  kRng = 1u << 4,            // the RNG states after it
  kTrackerSeeded = 1u << 5,  // the tracker states the run's own seeding made
  kFlag = 1u << 6,           // the is-checkpointing flag after it
  kAutocast = 1u << 7,       // the autocast state after it
  kErrors = 1u << 8,         // each error: where, what, and the RNG states it left
  kFloor = 1u << 9,          // what it held after each iteration, and whether a stash keeps a graph
};

// Each such property's reads. agree_for_eager compares exactly their union: a property that
// reads something new of a run says so here, or the shortcut would let two runs it tells apart
// through as alike (tests/properties_test.cpp holds every property to its entry).
unsigned eager_reads(const std::string& property) {
  static const std::map<std::string, unsigned> reads = {
      {"outputs-bitwise", kOutputs | kLoss},
      {"grads-match-eager", kLeafGrads},
      {"rng-restored", kRng | kTrackerSeeded},
      {"errors-match", kErrors | kTrackerSeeded},
      {"no-side-effects", kLeafData | kFlag | kAutocast},
      {"memory-eager-floor", kFloor},
  };
  const auto it = reads.find(property);
  if (it == reads.end()) throw std::logic_error("property " + property + " reads eager mode's run but declares no reads");
  return it->second;
}

// The union over every property that reads eager mode's run and applies to a run of
// `implementation` (its subject's properties).
unsigned eager_reads_of(const std::string& implementation) {
  const Subject& subject = subject_for(implementation);
  unsigned union_of = 0;
  for (const Property& p : properties()) {
    if (p.reads_eager && subject.applies(p.name)) union_of |= eager_reads(p.name);
  }
  return union_of;
}

}  // namespace

bool reads_eager_memory(const std::string& implementation) { return (eager_reads_of(implementation) & kFloor) != 0; }

bool agree_for_eager(const Observations& a, const Observations& b) {
  const unsigned reads = eager_reads_of(a.implementation) | eager_reads_of(b.implementation);
  if (a.iterations.size() != b.iterations.size()) return false;
  if ((reads & kTrackerSeeded) && a.tracker_seeded != b.tracker_seeded) return false;
  for (size_t i = 0; i < a.iterations.size(); ++i) {
    const IterationRecord& x = a.iterations[i];
    const IterationRecord& y = b.iterations[i];
    if (x.error.has_value() != y.error.has_value()) return false;
    if (((reads & kOutputs) && !same_tensors(x.outputs, y.outputs)) ||
        ((reads & kLoss) && bitwise_difference(x.loss, y.loss)) ||
        ((reads & kLeafGrads) && !same_tensors(x.leaf_grads, y.leaf_grads)) ||
        ((reads & kLeafData) && !same_tensors(x.leaf_data, y.leaf_data)) || ((reads & kRng) && !same_rng(x.rng, y.rng)) ||
        ((reads & kFlag) && x.checkpointing_flag != y.checkpointing_flag) ||
        ((reads & kAutocast) && x.autocast != y.autocast) ||
        ((reads & kFloor) && (x.memory.measured != y.memory.measured || x.memory.floor != y.memory.floor ||
                              keeps_a_graph(a, i) != keeps_a_graph(b, i)))) {
      return false;
    }
    if (x.error && (reads & kErrors) && !same_error(*x.error, *y.error)) return false;
  }
  if (a.error.has_value() != b.error.has_value()) return false;
  return !a.error || !(reads & kErrors) || same_error(*a.error, *b.error);
}


}  // namespace recheck
