// The subject megatron-checkpoint-function, built in: a port of Megatron-LM's CheckpointFunction
// (megatron/core/tensor_parallel/random.py), step for step, with the places where a plausible
// implementation could go another way named as decisions (CheckpointDecisions). A variant is
// the port with some decisions taken one way (variants.cpp, which declares the subject). The
// interface they implement is core/checkpoint_interface.h; the rest of recheck reaches them
// through the subject (suts/subject.h), never through this header.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint_interface.h"
#include "core/value.h"
#include "suts/subject.h"

namespace recheck {

// Each decision's first alternative is what Megatron's function does (released, before the
// change); the other alternatives are what someone writing or changing it could plausibly do
// instead. Every variant is a value of this struct, so a combination the port cannot mean
// cannot be written.
struct CheckpointDecisions {
  // The change under review: what backward does to the detached inputs' `.grad` once it has
  // collected them. Megatron, released: nothing (no clearing).
  struct Clearing {
    enum class When { after_collecting, before_collecting };
    enum class How {
      reset,             // `inp.grad = None`: the change
      zeroed_in_place,   // `inp.grad.zero_()`
      storage_freed,     // `inp.grad.data = torch.empty(0)`: the returned gradient empties too
    };
    enum class Whose {
      detached_inputs,           // this backward's detached inputs: the change
      detached_requiring_grad,   // only those that require grad (the others hold no .grad)
      callers_tensors,           // the tensors forward was called with, not their detached copies
      every_live_backward,       // the detached inputs of every backward in progress (nesting)
    };
    When when = When::after_collecting;
    How how = How::reset;
    Whose whose = Whose::detached_inputs;
  };
  std::optional<Clearing> clearing;

  // Forward: when the is-checkpointing flag is set, in forward and in backward.
  enum class FlagSet { before_the_body, after_the_body } flag_set = FlagSet::before_the_body;
  // What forward and backward leave the flag as when they return: unset (Megatron), set by
  // backward, or as each found it (a fix: nested checkpoints leave the outer body's flag set).
  enum class FlagOnReturn { unset, left_set_by_backward, as_found } flag_on_return = FlagOnReturn::unset;
  // What forward and backward do to the flag when they raise: Megatron leaves it as it is (set).
  enum class FlagOnError { left_as_it_is, unset } flag_on_error = FlagOnError::left_as_it_is;
  // How forward keeps the RNG states it saves.
  enum class RngSaved { copies, tracker_by_reference, deep_copies } rng_saved = RngSaved::copies;
  // What forward's error path does to the RNG states (eager mode leaves them where the body's
  // draws took them).
  enum class RngOnForwardError { left_as_drawn, rewound } rng_on_forward_error = RngOnForwardError::left_as_drawn;
  // The autocast state of the recomputation. Megatron records none: it recomputes under
  // whatever state backward runs in. A fix records it per call, as torch.utils.checkpoint does;
  // the mistakes in that fix keep it on the function, or lose its dtype.
  enum class Autocast { not_recorded, recorded_per_call, recorded_on_the_function, recorded_without_dtype }
      autocast = Autocast::not_recorded;

  // Backward, in Megatron's order.
  enum class ArgsOrder { as_given, tensors_first } args_order = ArgsOrder::as_given;
  enum class DistributedInput { gathered, left_split } distributed_input = DistributedInput::gathered;
  // Which RNG states are set, before recomputing and when putting backward's back.
  enum class RngSet { all, cpu_only, device_only, all_in_reverse_order } rng_set = RngSet::all;
  // The states the recomputation starts from.
  enum class RecomputeFrom { forward_states, current_states } recompute_from = RecomputeFrom::forward_states;
  // When backward's own states are put back after recomputing (`with _fork_rng()`).
  enum class RngRestored { always, on_success_only, never } rng_restored = RngRestored::always;
  enum class DetachedRequiresGrad { as_the_input, never, when_floating } detached_requires_grad =
      DetachedRequiresGrad::as_the_input;
  enum class RecomputeGradMode { enabled, disabled } recompute_grad_mode = RecomputeGradMode::enabled;
  // How often backward runs the body: once, or twice from forward's RNG states with the first
  // run's outputs dropped (a shape probe before the real recomputation). Every value comes out
  // as once; what the body changes outside itself (a module's running statistics, a step
  // counter) changes once more.
  enum class RecomputeRuns { once, twice } recompute_runs = RecomputeRuns::once;
  // Which gradients are paired with the recomputed outputs that require grad.
  enum class GradsPaired { filtered_with_them, unfiltered } grads_paired = GradsPaired::filtered_with_them;
  // How the recomputed graph is differentiated: torch.autograd.backward, which accumulates into
  // every leaf it reaches (the parameters a body captured too); torch.autograd.grad of the
  // detached inputs alone, a rewrite that gives captured parameters nothing; or one backward per
  // output (retaining the graph for the next), which accumulates the same sums where each
  // value feeds at most two outputs but calls a hook on a value feeding several once per output.
  enum class Differentiated { by_backward, inputs_only, per_output } differentiated = Differentiated::by_backward;
  // What backward returns for each detached input.
  enum class Collected { the_grad, the_grad_moved_out, a_copy, zeros_where_undefined } collected = Collected::the_grad;
  // What backward keeps or frees once it collected.
  enum class AfterCollecting { nothing, keeps_the_last_grads, frees_the_detached_inputs } after_collecting =
      AfterCollecting::nothing;

  // Not a decision of the function: crashes at the start of backward, to test that `recheck
  // run` isolates cases.
  enum class Crash { none, abort, segfault } crash = Crash::none;
};

// One implementation of the port's subject: what the subject lists of it (its name, kind, what a
// mutant was made from: suts/subject.h) and the decisions that make it.
struct Variant : SubjectImplementation {
  Variant(SubjectImplementation implementation, CheckpointDecisions decisions_)
      : SubjectImplementation(std::move(implementation)), decisions(std::move(decisions_)) {}
  CheckpointDecisions decisions;
};

// Every named variant, the correct ones first.
const std::vector<Variant>& variants();
// The variant called `name`; throws std::invalid_argument listing the known names otherwise.
const Variant& find_variant(const std::string& name);
// The names of the variants of one kind, in table order.
std::vector<std::string> variant_names(VariantKind kind);
// The decisions `decisions` takes otherwise than `from`, as "name = alternative" in the order
// the port meets them ("clearing.when = before_collecting"); "clearing = none" where
// `decisions` clears nothing and `from` does.
std::vector<std::string> decisions_taken_otherwise(const CheckpointDecisions& decisions, const CheckpointDecisions& from);
// The subject they make: Megatron's CheckpointFunction, the change to it and its variants.
Subject megatron_checkpoint_function();

class MegatronCheckpoint : public CheckpointImplementation {
 public:
  explicit MegatronCheckpoint(Variant variant) : variant_(std::move(variant)) {}
  std::string name() const override { return variant_.name; }
  Values apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) override;

 private:
  Variant variant_;
};

}  // namespace recheck
