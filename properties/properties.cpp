#include "properties/properties.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <map>
#include <stdexcept>
#include <utility>

#include "properties/body_state.h"
#include "properties/classification_rules.h"
#include "properties/discard_properties.h"
#include "properties/hook_properties.h"
#include "properties/module_state_properties.h"
#include "properties/memory_properties.h"
#include "properties/records.h"
#include "properties/value_properties.h"
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


// Every property, declared once: what it checks, and every fact its consumers read.
const std::vector<Property>& properties() {
  static const std::vector<Property> all = [] {
    std::vector<Property> list;
    auto declare = [&](const char* name, const char* description, Verdict (*check)(const Observations&, const Runs&)) -> Property& {
      Property property;
      property.name = name;
      property.description = description;
      property.check = check;
      list.push_back(std::move(property));
      return list.back();
    };
    {
      Property& p = declare("grads-bitwise", "every leaf's .grad after each iteration is bitwise equal to the oracle's",
                            grads_bitwise);
      p.compares_with_oracle = true;
      p.located = Located::at_value;
      p.exported = true;
      p.by_eager = {rules::grads_of_another_loss, rules::grads_bitwise_where_the_oracle_s_are_not_eager_s};
    }
    {
      Property& p = declare("outputs-bitwise", "forward outputs and the loss are bitwise equal to eager mode's",
                            outputs_bitwise);
      p.eager_reads = kReadsOutputs | kReadsLoss;
      p.located = Located::at_value;
      p.exported = true;
    }
    {
      Property& p = declare("recompute-fidelity",
                            "each checkpointed segment's recomputed outputs equal its forward outputs bitwise",
                            recompute_fidelity);
      p.located = Located::at_recomputation;
      p.exported = true;
      p.by_eager = {rules::recomputation_the_oracle_fails_too};
    }
    {
      Property& p = declare("grads-match-eager", "gradients match eager mode within the documented ulp bound",
                            grads_match_eager);
      p.eager_reads = kReadsLeafGrads;
      p.located = Located::at_value;
      p.exported = true;
      p.by_eager = {rules::grads_of_another_loss};
    }
    {
      Property& p = declare("hooks-match-eager",
                            "each hook a case hangs is called as often as eager mode's, with its gradients within the ulp bound",
                            hook_calls_match_eager);
      p.eager_reads = kReadsHookCalls;
      p.located = Located::at_value;
      p.exported = true;
    }
    {
      Property& p = declare("hooks-bitwise",
                            "the hooks' calls come in the oracle's order, each with the oracle's gradient bitwise",
                            hook_calls_bitwise);
      p.compares_with_oracle = true;
      p.located = Located::at_value;
      p.exported = true;
      p.by_eager = {rules::hooks_bitwise_where_the_oracle_s_are_not_eager_s};
    }
    {
      Property& p = declare("module-state-matches-eager",
                            "after every iteration each module's running mean and step counter are eager mode's, "
                            "updated as often",
                            module_state_matches_eager);
      p.eager_reads = kReadsModuleState;
      p.located = Located::by_evidence_alone;
      p.exported = true;
    }
    {
      Property& p = declare("rng-restored", "after every iteration the CPU, device and tracker states equal eager mode's",
                            rng_restored);
      p.eager_reads = kReadsRng | kReadsTrackerSeeded;
      p.located = Located::at_value;
      p.exported = true;
    }
    {
      Property& p = declare("errors-match", "errors have eager mode's type and message, and leave eager mode's RNG states",
                            errors_match);
      p.eager_reads = kReadsErrors | kReadsTrackerSeeded;
      p.located = Located::at_error;
      p.exported = true;
      p.by_eager = {rules::errors_both_runs_raise};
    }
    {
      Property& p = declare("no-side-effects",
                            "leaf data, the is-checkpointing flag and the autocast state are as eager mode leaves them, "
                            "after an error too",
                            no_side_effects);
      p.eager_reads = kReadsLeafData | kReadsFlag | kReadsAutocast;
      p.located = Located::at_value;
      p.exported = true;
    }
    {
      Property& p = declare("flag-in-body",
                            "is_checkpointing() reads set wherever a checkpoint's body runs, in forward and in "
                            "recomputation",
                            flag_in_body);
      p.reads_checkpointing_flag = true;
      p.located = Located::at_flag_reading;
      p.exported = true;
      p.by_its_records = {rules::flag_readings_the_oracle_shares};
    }
    {
      Property& p = declare("stash-kept",
                            "what a body stashes is, after the iteration, the oracle's: requires_grad, is_leaf, data "
                            "and version",
                            stash_kept);
      p.compares_with_oracle = true;
      p.located = Located::at_value;
      p.exported = true;
      p.by_its_records = {rules::a_stash_both_recomputations_get_wrong};
      p.by_eager = {rules::stash_eager_mode_keeps_as_the_sut_does};
    }
    {
      Property& p = declare("stash-grads",
                            "what a body stashes holds, after the iteration, the oracle's .grad (unless grad-released "
                            "is held)",
                            stash_grads);
      p.compares_with_oracle = true;
      p.yields_to_claim = "grad-released";
      p.located = Located::at_value;
      p.exported = true;
      p.by_its_records = {rules::a_stash_both_recomputations_get_wrong};
    }
    {
      Property& p = declare("grad-released",
                            "after backward no recomputation input still alive holds a .grad (a claim of the change)",
                            grad_released);
      p.claim_of_change = true;
      p.exported = true;
    }
    {
      Property& p = declare("memory-floor",
                            "floor <= the oracle's, below it by exactly the .grad bytes of stashed recomputation inputs; "
                            "peak <= the oracle's (a claim of the change)",
                            memory_floor);
      p.claim_of_change = true;
      p.compares_with_oracle = true;
    }
    {
      Property& p = declare("no-extra-allocations",
                            "every allocation, in each checkpoint forward, checkpoint backward and outside checkpoints, "
                            "is one the oracle makes there too (a claim of the change)",
                            no_extra_allocations);
      p.claim_of_change = true;
      p.same_code_only = true;
      p.compares_with_oracle = true;
    }
    {
      Property& p = declare("memory-eager-floor",
                            "after each iteration the floor is no higher than eager mode's: nothing checkpointing "
                            "stored, recomputed or collected outlives backward",
                            memory_eager_floor);
      p.eager_reads = kReadsFloor;
      p.by_its_records = {rules::a_leak_both_runs_have};
    }
    {
      Property& p = declare("discard-own-outputs",
                            "a discard frees and changes nothing of the caller's but the checkpoint's outputs (and "
                            "views of them made after it)",
                            discard_own_outputs);
      p.exported = true;
    }
    {
      Property& p = declare("discard-recomputed",
                            "each output a discard freed is recomputed exactly once where backward reached its hook, and "
                            "after the iteration holds its forward's data, dtype and storage size",
                            discard_recomputed);
      p.exported = true;
    }
    return list;
  }();
  return all;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : properties()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

void require_every_property_decided(const Subject& subject) {
  std::map<std::string, int> decided;
  for (const std::string& name : subject.properties) ++decided[name];
  for (const auto& [name, why] : subject.leaves_out) {
    ++decided[name];
    if (why.empty()) throw std::logic_error("subject " + subject.name + " leaves out " + name + " without saying why");
  }
  for (const auto& [name, times] : decided) {
    if (find_property(name) == nullptr) throw std::logic_error("subject " + subject.name + " names no property " + name);
    if (times > 1) throw std::logic_error("subject " + subject.name + " names " + name + " twice");
  }
  for (const Property& p : properties()) {
    if (decided.count(p.name) == 0) {
      throw std::logic_error("subject " + subject.name + " neither holds nor leaves out the property " + p.name +
                             " (suts/subject.h: Subject::properties, Subject::leaves_out)");
    }
  }
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

// The union over every property that reads eager mode's run and applies to a run of
// `implementation` (its subject's properties).
unsigned eager_reads_of(const std::string& implementation) {
  const Subject& subject = subject_for(implementation);
  unsigned union_of = 0;
  for (const Property& p : properties()) {
    if (subject.applies(p.name)) union_of |= p.eager_reads;
  }
  return union_of;
}

}  // namespace

bool reads_eager_memory(const std::string& implementation) { return (eager_reads_of(implementation) & kReadsFloor) != 0; }

bool agree_for_eager(const Observations& a, const Observations& b) {
  const unsigned reads = eager_reads_of(a.implementation) | eager_reads_of(b.implementation);
  if (a.iterations.size() != b.iterations.size()) return false;
  if ((reads & kReadsTrackerSeeded) && a.tracker_seeded != b.tracker_seeded) return false;
  for (size_t i = 0; i < a.iterations.size(); ++i) {
    const IterationRecord& x = a.iterations[i];
    const IterationRecord& y = b.iterations[i];
    if (x.error.has_value() != y.error.has_value()) return false;
    if (((reads & kReadsOutputs) && !same_tensors(x.outputs, y.outputs)) ||
        ((reads & kReadsLoss) && bitwise_difference(x.loss, y.loss)) ||
        ((reads & kReadsLeafGrads) && !same_tensors(x.leaf_grads, y.leaf_grads)) ||
        ((reads & kReadsLeafData) && !same_tensors(x.leaf_data, y.leaf_data)) || ((reads & kReadsRng) && !same_rng(x.rng, y.rng)) ||
        ((reads & kReadsFlag) && x.checkpointing_flag != y.checkpointing_flag) ||
        ((reads & kReadsAutocast) && x.autocast != y.autocast) ||
        ((reads & kReadsHookCalls) && !same_hook_calls(x.hook_calls, y.hook_calls)) ||
        ((reads & kReadsModuleState) && !same_module_state(x.modules, y.modules)) ||
        ((reads & kReadsFloor) && (x.memory.measured != y.memory.measured || x.memory.floor != y.memory.floor ||
                              keeps_a_graph(a, i) != keeps_a_graph(b, i)))) {
      return false;
    }
    if (x.error && (reads & kReadsErrors) && !same_error(*x.error, *y.error)) return false;
  }
  if (a.error.has_value() != b.error.has_value()) return false;
  return !a.error || !(reads & kReadsErrors) || same_error(*a.error, *b.error);
}


}  // namespace recheck
