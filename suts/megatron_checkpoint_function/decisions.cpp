// The decisions of the port by name (checkpoint.h), for `recheck variants` and the tests
// that hold each mutant to one decision.
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "suts/megatron_checkpoint_function/checkpoint.h"

namespace recheck {

namespace {

using D = CheckpointDecisions;

// A decision's value by name; a value the list does not name (a new one, its name forgotten)
// is a logic error, not a read past the list.
template <typename Enum>
std::string name_of(Enum value, std::initializer_list<const char*> names) {
  const auto index = static_cast<size_t>(value);
  if (index >= names.size()) throw std::logic_error("decisions.cpp: a decision's value " + std::to_string(index) + " has no name");
  return names.begin()[index];
}

struct DecisionRow {
  const char* name;
  std::string (*value)(const D&);
};

// One row per decision point, in the order backward meets them; each names its alternatives in
// their declaration order.
const DecisionRow kDecisions[] = {
    {"clearing", [](const D& d) { return std::string(d.clearing ? "set" : "none"); }},
    {"clearing.when", [](const D& d) {
       return d.clearing ? name_of(d.clearing->when, {"after_collecting", "before_collecting"}) : "-";
     }},
    {"clearing.how", [](const D& d) {
       return d.clearing ? name_of(d.clearing->how, {"reset", "zeroed_in_place", "storage_freed"}) : "-";
     }},
    {"clearing.whose", [](const D& d) {
       return d.clearing ? name_of(d.clearing->whose, {"detached_inputs", "detached_requiring_grad", "callers_tensors",
                                                       "every_live_backward"})
                         : "-";
     }},
    {"flag_set", [](const D& d) { return name_of(d.flag_set, {"before_the_body", "after_the_body"}); }},
    {"flag_on_return", [](const D& d) { return name_of(d.flag_on_return, {"unset", "left_set_by_backward", "as_found"}); }},
    {"flag_on_error", [](const D& d) { return name_of(d.flag_on_error, {"left_as_it_is", "unset"}); }},
    {"rng_saved", [](const D& d) { return name_of(d.rng_saved, {"copies", "tracker_by_reference", "deep_copies"}); }},
    {"rng_on_forward_error", [](const D& d) { return name_of(d.rng_on_forward_error, {"left_as_drawn", "rewound"}); }},
    {"autocast", [](const D& d) {
       return name_of(d.autocast, {"not_recorded", "recorded_per_call", "recorded_on_the_function", "recorded_without_dtype"});
     }},
    {"args_order", [](const D& d) { return name_of(d.args_order, {"as_given", "tensors_first"}); }},
    {"distributed_input", [](const D& d) { return name_of(d.distributed_input, {"gathered", "left_split"}); }},
    {"rng_set", [](const D& d) { return name_of(d.rng_set, {"all", "cpu_only", "device_only", "all_in_reverse_order"}); }},
    {"recompute_from", [](const D& d) { return name_of(d.recompute_from, {"forward_states", "current_states"}); }},
    {"rng_restored", [](const D& d) { return name_of(d.rng_restored, {"always", "on_success_only", "never"}); }},
    {"detached_requires_grad", [](const D& d) {
       return name_of(d.detached_requires_grad, {"as_the_input", "never", "when_floating"});
     }},
    {"recompute_grad_mode", [](const D& d) { return name_of(d.recompute_grad_mode, {"enabled", "disabled"}); }},
    {"recompute_runs", [](const D& d) { return name_of(d.recompute_runs, {"once", "twice"}); }},
    {"grads_paired", [](const D& d) { return name_of(d.grads_paired, {"filtered_with_them", "unfiltered"}); }},
    {"differentiated", [](const D& d) { return name_of(d.differentiated, {"by_backward", "inputs_only", "per_output"}); }},
    {"collected", [](const D& d) {
       return name_of(d.collected, {"the_grad", "the_grad_moved_out", "a_copy", "zeros_where_undefined"});
     }},
    {"after_collecting", [](const D& d) {
       return name_of(d.after_collecting, {"nothing", "keeps_the_last_grads", "frees_the_detached_inputs"});
     }},
    {"crash", [](const D& d) { return name_of(d.crash, {"none", "abort", "segfault"}); }},
};

}  // namespace

std::vector<std::string> decisions_taken_otherwise(const CheckpointDecisions& decisions, const CheckpointDecisions& from) {
  std::vector<std::string> differences;
  for (const DecisionRow& row : kDecisions) {
    // How and whose a clearing clears say nothing where one side clears nothing: "clearing" does.
    const bool of_the_clearing = std::string(row.name).rfind("clearing.", 0) == 0;
    if (of_the_clearing && (!decisions.clearing || !from.clearing)) continue;
    const std::string value = row.value(decisions);
    if (value != row.value(from)) differences.push_back(std::string(row.name) + " = " + value);
  }
  return differences;
}

}  // namespace recheck
