// The functions under test: a port of Megatron-LM's CheckpointFunction
// (megatron/core/tensor_parallel/random.py), step for step, and its variants as named options.
// The interface they implement is core/checkpoint_interface.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint_interface.h"
#include "core/value.h"

namespace recheck {

// The options that make the named variants. Each is one plausible way to write the function.
struct CheckpointOptions {
  // The change under test: reset `.grad` of every detached input after backward collected it.
  bool clear_detached_grads = false;

  // Mutants: plausible mistakes in a checkpoint change, each one field. The suite must kill
  // every one of them (tests/mutants_test.cpp).
  bool clear_before_collect = false;              // reset .grad before reading it
  bool zero_grad_in_place = false;                // grad.zero_() instead of resetting it
  bool skip_restore_rng_after_recompute = false;  // no `finally` restore of the fork
  bool skip_set_forward_rng = false;              // recompute from the current states
  bool rng_cpu_only = false;                      // save and restore only the CPU state
  bool rng_device_only = false;                   // save and restore only the device state
  bool tracker_saved_by_reference = false;        // keep the live tracker map, not a copy
  bool recompute_without_grad = false;            // recompute with grad mode off
  bool leave_flag_set = false;                    // is-checkpointing not unset after backward
  bool free_grad_storage = false;                 // frees the storage of the collected .grad
  bool clear_caller_grads = false;                // resets the caller's tensors' .grad instead
  bool clear_all_live = false;                    // resets .grad of every backward's detached inputs
  bool restore_not_exception_safe = false;        // restores RNG only when recompute succeeded
  bool detach_drops_requires_grad = false;        // detached inputs never require grad
  bool detach_forces_requires_grad = false;       // floating detached inputs always require grad
  bool args_remerged_out_of_order = false;        // tensors first, then the non-tensors
  bool distributed_input_not_restored = false;    // no gather of args[0] before recompute
  bool grads_paired_unfiltered = false;           // outputs filtered, their grads not
  bool keep_last_grads = false;                   // keeps the last collected grads (a debug aid)
  bool set_flag_after_body = false;               // sets is-checkpointing once the body ran or raised
  bool free_detached_inputs = false;              // frees each detached input's data after collecting
  // Mistakes whose only effect may be memory: the allocations property is what sees them.
  bool return_grad_copies = false;                // returns a copy of each collected gradient
  bool materialize_zero_grads = false;            // zeros where the collected gradient is undefined
  bool deep_copy_rng_states = false;              // saves deep copies of the RNG states
  // A mistake only on the error path: the RNG states put back as forward found them when its
  // body raises (eager mode leaves them where the body's draws took them).
  bool rng_rewound_on_error = false;              // forward's error path rewinds the RNG states

  // A fix of the released function, not of the change: forward and backward unset the
  // is-checkpointing flag when they raise, as a try/finally would (Megatron's leave it set).
  bool reset_flag_on_error = false;
  // A fix of the released function: forward and backward put the is-checkpointing flag back as
  // they found it, instead of unsetting it, so that a body's ops after a nested checkpoint still
  // read it set (Megatron's nested checkpoint unsets it for the rest of the outer body).
  bool restore_flag_after_nesting = false;
  // A fix of the released function: forward records the autocast state (CPU and CUDA) and the
  // recomputation runs under it, as torch.utils.checkpoint does (Megatron's records none and
  // recomputes under whatever state backward runs in).
  bool restore_autocast = false;
  // Mistakes in that fix, each losing part of the recorded state on the recomputation path:
  // the state is kept on the function, not per call, so every recomputation runs under the
  // state the last forward recorded; or only whether autocast was on is restored, in the device
  // type's default dtype (CPU bfloat16, CUDA float16).
  bool autocast_recorded_per_function = false;
  bool autocast_dtype_lost = false;

  // Equivalent rewrites of the change: correct, so the suite must raise no alarm on them
  // (`recheck mutants` checks them with the control).
  bool restore_rng_reversed = false;              // sets tracker, device, CPU states, in that order
  bool clear_only_requiring_grad = false;         // resets .grad only where the input requires grad
  bool move_grads_out = false;                    // moves each gradient out of .grad as it collects

  // Not mistakes but crashes, to test that `recheck run` isolates cases: at the start of
  // backward, abort the process, or write through a null pointer (a segmentation fault).
  bool abort_in_backward = false;
  bool segfault_in_backward = false;
};

struct Variant {
  std::string name;
  std::string description;
  CheckpointOptions options;
  bool is_mutant = false;
  bool is_equivalent = false;  // a correct rewrite of the change: any alarm on it is a false alarm
  bool is_fix = false;  // the change plus a fix of the released function: `fixed`, never an alarm
  // A mutant that only cases this build cannot run on CPU tell from the oracle: why (empty for
  // the rest). On CPU, `recheck mutants` and the mutant tests skip it, saying so.
  std::string cannot_be_killed_on_cpu = {};
};

// Every named variant, the correct ones first.
const std::vector<Variant>& variants();
// The variant called `name`; throws std::invalid_argument listing the known names otherwise.
const Variant& find_variant(const std::string& name);

class MegatronCheckpoint : public CheckpointImplementation {
 public:
  explicit MegatronCheckpoint(Variant variant) : variant_(std::move(variant)) {}
  std::string name() const override { return variant_.name; }
  Values apply(const RunFunction& run_function, bool distribute_saved_activations,
               const Values& args) override;

 private:
  Variant variant_;
};

std::unique_ptr<CheckpointImplementation> make_checkpoint(const std::string& variant_name);

}  // namespace recheck
