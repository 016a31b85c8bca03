#include "properties/properties.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <stdexcept>

namespace recheck {

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

const char* to_string(Classification c) {
  switch (c) {
    case Classification::pass: return "pass";
    case Classification::regression: return "regression";
    case Classification::pre_existing: return "pre-existing";
    case Classification::fixed: return "fixed";
    case Classification::divergent: return "divergent";
    case Classification::unreached: return "unreached";
  }
  return "?";
}

std::optional<Classification> classification_named(const std::string& name) {
  for (const Classification c : {Classification::pass, Classification::regression, Classification::pre_existing,
                                 Classification::fixed, Classification::divergent, Classification::unreached}) {
    if (name == to_string(c)) return c;
  }
  return std::nullopt;
}

Classification classify(const Verdict& oracle, const Verdict& sut) {
  if (oracle.holds && sut.holds) return Classification::pass;
  if (oracle.holds) return Classification::regression;
  if (sut.holds) return Classification::fixed;
  return oracle.describe() == sut.describe() ? Classification::pre_existing : Classification::divergent;
}

bool reached(const Verdict& failed, const Observations& run) {
  if (failed.segment_record >= 0) {
    const size_t record = static_cast<size_t>(failed.segment_record);
    if (record >= run.segment_calls.size() || run.segment_calls[record].iteration != failed.iteration) return false;
    return static_cast<int>(run.segment_calls[record].calls.size()) > failed.call;
  }
  if (failed.iteration < 0) return true;
  const size_t i = static_cast<size_t>(failed.iteration);
  if (i >= run.iterations.size()) return false;
  const std::optional<ErrorRecord>& error = run.iterations[i].error;
  // An iteration that raised was not completed; the state its error left is reached by a run
  // that raised in it too.
  if (failed.after_error) return error.has_value();
  if (failed.about_the_error) return true;
  return !error.has_value();
}

Classification classify(const Verdict& oracle, const Verdict& sut, const Observations& oracle_run,
                        const Observations& sut_run) {
  // A verdict that holds only because its run stopped before the point the other failed at.
  if (oracle.holds && !sut.holds && !reached(sut, oracle_run)) return Classification::unreached;
  if (sut.holds && !oracle.holds && !reached(oracle, sut_run)) return Classification::unreached;
  // Both fail, the oracle first: the sut held where the oracle failed and went on, to fail at a
  // point the oracle's run never reached. Nothing there can be compared.
  if (!oracle.holds && !sut.holds && oracle.iteration >= 0 && sut.iteration > oracle.iteration &&
      !reached(sut, oracle_run) && oracle.describe() != sut.describe()) {
    return Classification::unreached;
  }
  return classify(oracle, sut);
}

Classification classify(const Property& property, const Verdict& oracle, const Verdict& sut,
                        const Observations& oracle_run, const Observations& sut_run) {
  if (property.claim_of_change) return sut.holds ? Classification::pass : Classification::regression;
  return classify(oracle, sut, oracle_run, sut_run);
}

namespace {

// What errors-match adds to an error that left the RNG states other than backward found them.
const char* const kRngNotRestored = "; RNG not restored when the error reached the caller: ";

std::string at_iteration(size_t i) { return "iteration " + std::to_string(i); }
std::string leaf(size_t i) { return "leaf v" + std::to_string(i); }

// Two runs that stopped after a different number of iterations are told apart by errors-match;
// the tensor properties compare the iterations both ran.
size_t common_iterations(const Observations& a, const Observations& b) {
  return std::min(a.iterations.size(), b.iterations.size());
}

// Both runs completed iteration i.
bool completed(const IterationRecord& a, const IterationRecord& b) { return !a.error && !b.error; }

// Iteration i of two runs can be compared: both completed it, or both raised the same error in
// the same phase of it, and then what is compared is the state the error left. Runs that part
// there are errors-match's to judge.
bool comparable(const IterationRecord& a, const IterationRecord& b) {
  if (completed(a, b)) return true;
  return a.error && b.error && a.error->phase == b.error->phase && a.error->error == b.error->error;
}

// "iteration 1", or "iteration 1, after its error" for the state an error left.
std::string at_record(size_t i, const IterationRecord& r) {
  return at_iteration(i) + (r.error ? " (after its error)" : "");
}

// A failure in the records of iteration i, which may be the state an error left.
Verdict fail_at(size_t i, const IterationRecord& r, std::string where, std::optional<Difference> difference,
                std::string detail = "") {
  Verdict v = Verdict::fail_in(i, std::move(where), std::move(difference), std::move(detail));
  v.after_error = r.error.has_value();
  return v;
}

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

// The first error a run raised in iteration `from` or later (the run's first, without records).
std::optional<ErrorRecord> first_error_from(const Observations& run, size_t from) {
  for (size_t i = from; i < run.iterations.size(); ++i) {
    if (run.iterations[i].error) return run.iterations[i].error;
  }
  return run.iterations.empty() ? run.error : std::nullopt;
}

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
Verdict memory_floor(const Observations& subject, const Runs& runs) {
  const Observations& oracle = runs.oracle;
  for (size_t i = 0; i < common_iterations(subject, oracle); ++i) {
    const MemoryRecord& s = subject.iterations[i].memory;
    const MemoryRecord& o = oracle.iterations[i].memory;
    if (!s.measured || !o.measured) continue;
    const std::string at = "after " + at_iteration(i);
    if (s.floor > o.floor) {
      return Verdict::fail_in(i, at, std::nullopt, "floor " + std::to_string(s.floor) + " bytes, above the oracle's " +
                                                       std::to_string(o.floor));
    }
    const int64_t freed = o.floor - s.floor;
    if (freed != o.released_bytes) {
      return Verdict::fail_in(i, at, std::nullopt,
                              "floor " + bytes(freed) + " below the oracle's, predicted " + std::to_string(o.released_bytes) +
                                  " (what letting go of the .grad of its " + std::to_string(o.released_grads) +
                                  " live recomputation inputs frees)");
    }
    if (s.peak > o.peak) {
      return Verdict::fail_in(i, "during " + at_iteration(i), std::nullopt,
                              "peak " + std::to_string(s.peak) + " bytes, above the oracle's " + std::to_string(o.peak));
    }
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

// The properties that compare the subject with eager mode which the sut holds and the oracle
// fails: where the sut fixes the oracle's function, as eager autograd judges. Their names, joined.
std::string fixed_against_eager(const std::vector<PropertyResult>& results) {
  std::string names;
  for (const PropertyResult& r : results) {
    const Property* p = find_property(r.property);
    if (p == nullptr || !p->reads_eager || r.classification != Classification::fixed) continue;
    names += (names.empty() ? "" : ", ") + r.property;
  }
  return names;
}

// Where both runs fail a property and eager mode says the sut is the nearer of the two, the pair
// is not compared by the difference of their evidence (NOTE [ The oracle is no reference ]):
//  - errors-match: both raised the same error at the same point, and only the oracle's left the
//    RNG states unrestored: the sut fixed that part, `fixed`.
//  - grads-bitwise: the oracle's gradients are not eager mode's (it fails grads-match-eager), so
//    they are no reference for the sut's bits; grads-match-eager judges the two against eager
//    mode instead, and grads-bitwise is `pre-existing`.
//  - errors-match: both raised errors eager mode did not, different ones, in the same iteration,
//    the sut after more of it than the oracle (a later phase, or more ops completed): the sut
//    got past the oracle's error and raised at a point the oracle never reached, `unreached`.
//    Raised at the same point (the same phase and ops completed), both fail there whatever the
//    message says: `pre-existing`. Raised earlier, the pair stays divergent.
//  - grads-bitwise, grads-match-eager: both runs' outputs or loss already differ from eager mode's
//    the same way (outputs-bitwise pre-existing) in this iteration or before: their gradients are
//    those of another loss than eager mode's, `pre-existing` (a mistake that loses a gradient
//    can otherwise match eager mode's missing one by chance, and its fix look like a regression).
//  - recompute-fidelity: the sut holds the checkpoint call where the oracle first fails and fails
//    a later one: the oracle, judged from that later call on, fails that call too (`pre-existing`:
//    the sut fixed the first and shares the second, whose numbers the oracle's first bug may
//    move) or not (divergent, as ever).
void judge_by_eager_where_the_oracle_is_wrong(std::vector<PropertyResult>& results, const Observations& oracle,
                                              const Observations& sut, const Runs& runs) {
  const PropertyResult* match_eager = nullptr;
  const PropertyResult* outputs = nullptr;
  for (const PropertyResult& r : results) {
    if (r.property == "grads-match-eager") match_eager = &r;
    if (r.property == "outputs-bitwise") outputs = &r;
  }
  for (PropertyResult& r : results) {
    if (r.classification != Classification::divergent && r.classification != Classification::regression) continue;
    if (r.property == "errors-match" && !r.oracle.holds && !r.sut.holds) {
      const std::string oracle_text = r.oracle.describe();
      const size_t unrestored = oracle_text.find(kRngNotRestored);
      if (unrestored != std::string::npos && r.sut.describe().find(kRngNotRestored) == std::string::npos &&
          oracle_text.substr(0, unrestored) == r.sut.describe()) {
        r.classification = Classification::fixed;
        r.sut.detail += "; the same error as the oracle's, which alone left the RNG states unrestored";
      } else if (r.classification == Classification::divergent && r.sut.iteration >= 0) {
        const size_t parted = static_cast<size_t>(r.sut.iteration);
        const std::optional<ErrorRecord> s = first_error_from(sut, parted);
        const std::optional<ErrorRecord> o = first_error_from(oracle, parted);
        const auto progress = [](const ErrorRecord& e) { return std::make_pair(e.phase == "backward", e.ops_completed); };
        if (s && o && s->iteration == o->iteration && !(s->error == o->error) && progress(*s) > progress(*o)) {
          r.classification = Classification::unreached;
          r.sut.detail += "; raised after " + std::to_string(s->ops_completed) + " ops of iteration " +
                          std::to_string(s->iteration) + " " + s->phase + ", past the oracle's error (after " +
                          std::to_string(o->ops_completed) + " ops, " + o->phase + "): a point the oracle never reached";
        } else if (s && o && s->iteration == o->iteration && !(s->error == o->error) && progress(*s) == progress(*o)) {
          r.classification = Classification::pre_existing;
          r.sut.detail += "; raised at the point the oracle raised its own (after " + std::to_string(s->ops_completed) +
                          " ops of iteration " + std::to_string(s->iteration) + " " + s->phase +
                          "), where eager mode did not: another message for a failure both have";
        }
      }
    } else if (r.property == "recompute-fidelity" && !r.oracle.holds && !r.sut.holds &&
               r.sut.segment_record > r.oracle.segment_record && r.oracle.segment_record >= 0) {
      Observations from_there = oracle;
      for (int k = 0; k < r.sut.segment_record; ++k) from_there.segment_calls[static_cast<size_t>(k)].calls.clear();
      const Verdict there = recompute_fidelity(from_there, runs);
      if (!there.holds && there.segment_record == r.sut.segment_record) {
        r.classification = Classification::pre_existing;
        r.sut.detail += "; where the oracle first fails this run holds, and the oracle fails this call too";
      }
    } else if ((r.property == "grads-bitwise" || r.property == "grads-match-eager") && outputs != nullptr &&
               outputs->classification == Classification::pre_existing && r.sut.iteration >= outputs->sut.iteration) {
      r.classification = Classification::pre_existing;
      r.sut.detail += std::string(r.sut.detail.empty() ? "" : "; ") + "both runs' " + outputs->sut.where +
                      " already differs from eager mode's, the same way: the gradients of another loss";
    } else if (r.property == "grads-bitwise" && match_eager != nullptr && !match_eager->oracle.holds) {
      r.classification = Classification::pre_existing;
      r.sut.detail += std::string(r.sut.detail.empty() ? "" : "; ") +
                      "the oracle's gradients are not eager mode's (grads-match-eager): no reference for these bits";
    }
  }
}

// The checks of every property, or of those that do not read the eager run when it is null.
std::vector<PropertyResult> check_all(const Observations* eager, const Observations& oracle, const Observations& sut,
                                      ChangeClaims claims, const ClaimChoice& choice) {
  // Without an eager run, the properties that read it are skipped, never handed this one.
  const Runs runs{eager ? *eager : oracle, oracle};
  std::vector<PropertyResult> results;
  for (const Property& p : properties()) {
    if (!choice.checks(p, claims)) continue;
    if (p.reads_eager && !eager) continue;
    if (p.same_code_only && oracle.code != sut.code) continue;
    PropertyResult r;
    r.property = p.name;
    r.oracle = p.check(oracle, runs);
    r.sut = p.check(sut, runs);
    if (p.claim_of_change && choice.chosen) {
      r.classification = r.sut.holds ? Classification::pass : Classification::regression;
    } else {
      switch (claims) {
        case ChangeClaims::made:
          r.classification = classify(p, r.oracle, r.sut, oracle, sut);
          break;
        case ChangeClaims::like_oracle:
          r.classification = classify(r.oracle, r.sut, oracle, sut);
          break;
        // Another function has no change to regress: what it fails is its own, pre-existing.
        case ChangeClaims::not_applicable:
          r.classification = r.sut.holds ? Classification::pass : Classification::pre_existing;
          break;
      }
    }
    results.push_back(std::move(r));
  }
  if (claims == ChangeClaims::not_applicable) return results;
  if (eager) judge_by_eager_where_the_oracle_is_wrong(results, oracle, sut, runs);
  // NOTE [ The oracle is no reference ] Where the sut fixes the oracle's function, what the
  // oracle computed is no reference for the sut: a property that compares the sut with the
  // oracle (its gradients, memory or allocations) and fails is `fixed`, not a regression.
  //  1. Eager autograd judges the fix: the sut holds a property that compares with eager mode
  //     where the oracle fails it (a pull request fixes a bug of its base).
  //  2. The oracle recomputes under another autocast state than its forward ran in, and the sut
  //     does not (autocast-restored): its backward ran another graph than its forward's.
  // Either way, where both fail another property, the oracle's evidence is shaped by the bug the
  // sut fixed, and the two cannot be told apart by its difference: a would-be divergent pair is
  // pre-existing.
  // A sut that fails a property that compares with eager mode where the oracle holds it is a
  // regression whatever it fixed: a fix hides nothing eager autograd sees.
  const std::string fixed = eager ? fixed_against_eager(results) : "";
  const bool autocast_unfaithful =
      !recomputes_in_forward_s_autocast_state(oracle) && recomputes_in_forward_s_autocast_state(sut);
  if (fixed.empty() && !autocast_unfaithful) return results;
  const std::string why =
      autocast_unfaithful
          ? "the oracle recomputes under another autocast state than its forward ran in and this run does not: the "
            "oracle is no reference here"
          : "this run holds " + fixed + " where the oracle fails it, as eager mode judges: the oracle is no reference here";
  for (PropertyResult& r : results) {
    if (r.sut.holds) continue;
    const Property* p = find_property(r.property);
    const bool compared = p->compares_with_oracle;
    const bool divergent = r.classification == Classification::divergent;
    if (!compared && !divergent) continue;
    r.classification = compared ? Classification::fixed : Classification::pre_existing;
    r.sut.detail += std::string(r.sut.detail.empty() ? "" : "; ") + why;
  }
  return results;
}

}  // namespace

bool agree_for_eager(const Observations& a, const Observations& b) {
  if (a.iterations.size() != b.iterations.size()) return false;
  for (size_t i = 0; i < a.iterations.size(); ++i) {
    const IterationRecord& x = a.iterations[i];
    const IterationRecord& y = b.iterations[i];
    if (!same_tensors(x.outputs, y.outputs) || bitwise_difference(x.loss, y.loss) ||
        !same_tensors(x.leaf_grads, y.leaf_grads) || !same_tensors(x.leaf_data, y.leaf_data) ||
        !same_rng(x.rng, y.rng) || x.checkpointing_flag != y.checkpointing_flag || x.autocast != y.autocast ||
        x.error.has_value() != y.error.has_value()) {
      return false;
    }
    if (x.error && !same_error(*x.error, *y.error)) return false;
  }
  if (a.error.has_value() != b.error.has_value()) return false;
  return !a.error || same_error(*a.error, *b.error);
}

std::vector<PropertyResult> check_properties(const Observations& eager, const Observations& oracle,
                                             const Observations& sut, ChangeClaims claims, const ClaimChoice& choice) {
  return check_all(&eager, oracle, sut, claims, choice);
}

std::vector<PropertyResult> check_properties_without_eager(const Observations& oracle, const Observations& sut,
                                                           ChangeClaims claims, const ClaimChoice& choice) {
  return check_all(nullptr, oracle, sut, claims, choice);
}

bool ClaimChoice::checks(const Property& property, ChangeClaims claims) const {
  if (!property.claim_of_change) return true;
  if (chosen) return held.count(property.name) != 0;
  return claims != ChangeClaims::not_applicable;
}

std::vector<std::string> claim_names() {
  std::vector<std::string> names;
  for (const Property& p : properties()) {
    if (p.claim_of_change) names.emplace_back(p.name);
  }
  return names;
}

ClaimChoice parse_claims(const std::string& text) {
  ClaimChoice choice;
  choice.chosen = true;
  if (text == "none") return choice;
  const std::vector<std::string> known = claim_names();
  if (text == "clearing") {
    choice.held.insert(known.begin(), known.end());
    return choice;
  }
  std::string listed;
  for (const std::string& name : known) listed += (listed.empty() ? "" : ", ") + name;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string name = text.substr(from, comma - from);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument("--claims: no claim '" + name + "'; expected none, clearing (every claim: " + listed +
                                  "), or some of those names joined by commas");
    }
    choice.held.insert(name);
    from = comma + 1;
  }
  return choice;
}

std::string describe_claims(const ClaimChoice& choice) {
  if (!choice.chosen) return "";
  if (choice.held.empty()) return "none";
  const std::vector<std::string> known = claim_names();
  if (choice.held.size() == known.size()) return "clearing";
  std::string text;
  for (const std::string& name : known) {  // in the properties' order, whatever order they were given in
    if (choice.held.count(name) != 0) text += (text.empty() ? "" : ",") + name;
  }
  return text;
}

}  // namespace recheck
