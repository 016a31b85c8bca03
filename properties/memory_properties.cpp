// The properties of what a run holds: the .grad the change lets go of, the allocator's floor and
// peak, and the allocations themselves (declared in properties.cpp).
#include "properties/memory_properties.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "properties/records.h"

namespace recheck {

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

namespace {

std::string bytes(int64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

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

}  // namespace

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
    std::string alive = inputs.empty() ? "" : "; recomputation inputs alive: " + list_alive(inputs, inputs.size());
    const std::vector<std::string>& objects = subject.iterations[i].alive_checkpoints;
    for (size_t k = 0; k < objects.size(); ++k) alive += (k == 0 ? "; checkpoint objects alive: " : ", ") + objects[k];
    Verdict verdict = Verdict::fail_in(i, "after " + at_iteration(i), std::nullopt,
                                       "floor " + std::to_string(s.floor) + " bytes, " + bytes(s.floor - e.floor) +
                                           " above eager mode's " + std::to_string(e.floor) + alive);
    verdict.excess = s.floor - e.floor;
    return verdict;
  }
  return Verdict::pass();
}

namespace {
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
}  // namespace

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


}  // namespace recheck
