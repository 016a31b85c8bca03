// The functions under test: a port of Megatron-LM's CheckpointFunction
// (megatron/core/tensor_parallel/random.py), step for step, and its variants as named options.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/value.h"

namespace recheck {

namespace rng {
struct TrackerHooks;
}

// How the change's claims apply to a variant:
//   made:            the change, or the change with a mistake (every C++ variant): held to them;
//   like_oracle:     the same function without the change (released Megatron code): held to
//                    what the oracle does, so that failing a claim as the oracle fails it is
//                    pre-existing, and allocating differently from it is a finding;
//   not_applicable:  another function (PyTorch's checkpoint): not checked, and there being no
//                    change to regress, every property it fails is pre-existing.
enum class ChangeClaims { made, like_oracle, not_applicable };

// The RNG sources a variant saves before forward and restores around recomputation.
// Generated cases for a variant draw only from its sources, and rng-restored holds it to them.
struct RngSources {
  bool cpu = true;
  bool device = true;
  bool tracker = true;  // Megatron's CudaRNGStatesTracker (and the fork ops that use it)
};

// A checkpointed segment's body, called once in forward and again to recompute in backward.
using RunFunction = std::function<Values(const Values&)>;

// What the interpreter calls for every checkpoint op. C++ variants, eager execution and (later)
// Python implementations all plug in here.
class CheckpointImplementation {
 public:
  virtual ~CheckpointImplementation() = default;
  virtual std::string name() const = 0;
  virtual Values apply(const RunFunction& run_function, bool distribute_saved_activations,
                       const Values& args) = 0;

  virtual RngSources rng_sources(bool on_cuda) const {
    (void)on_cuda;
    return {};
  }
  // How the change's claims (grad-released, memory-floor, no-extra-allocations) apply to it.
  virtual ChangeClaims change_claims() const { return ChangeClaims::made; }
  // The code it runs, as one name for every variant of the same code: recheck's C++ port (all
  // its variants), or a Python module's function (with or without the clearing wrapper).
  // Allocations are compared only between runs of the same code: another code base allocates
  // its own way, which says nothing about the change (properties/properties.h).
  virtual std::string code() const { return "recheck's C++ port of Megatron's CheckpointFunction"; }
  // Whether it can run a checkpoint that distributes its saved activations.
  virtual bool distributes() const { return true; }
  // The tracker the case's tracker draws and fork ops use while this implementation runs;
  // null: recheck's own (suts/rng.h).
  virtual const rng::TrackerHooks* tracker() const { return nullptr; }
  // The is-checkpointing flag this implementation keeps (Megatron's module global for a Python
  // variant), and putting it down before a run.
  virtual bool checkpointing_flag() const;
  virtual void reset_checkpointing_flag();
  // Called once in a process that is about to check cases (recheck run's worker), before the
  // first: throws, naming the cause, when the implementation cannot run in this process.
  virtual void check_process_ready(bool on_cuda) const { (void)on_cuda; }
};

// Variants from elsewhere: a name "PREFIX:..." goes to the factory registered for PREFIX
// (the Python bridge registers "python" and "python-clearing").
using CheckpointFactory = std::function<std::unique_ptr<CheckpointImplementation>(const std::string& name)>;
void register_checkpoint_factory(const std::string& prefix, CheckpointFactory factory);
// Whether `name` is a Python variant, and whether this process has the bridge that runs them.
bool needs_python_bridge(const std::string& name);
bool python_bridge_built();
// Short names for registered ones ("megatron-py" for "python:megatron...").
void register_checkpoint_alias(const std::string& alias, const std::string& name);

// The global "is checkpointing" flag: set while a checkpoint's forward or backward runs.
bool is_checkpointing();
void set_checkpointing(bool value);

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
  // Mistakes whose only effect may be memory: the allocations property is what sees them.
  bool return_grad_copies = false;                // returns a copy of each collected gradient
  bool materialize_zero_grads = false;            // zeros where the collected gradient is undefined
  bool deep_copy_rng_states = false;              // saves deep copies of the RNG states

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

// Before a process checks its first case: the device works here (one small op; none for the
// CPU) and each implementation can run here (check_process_ready). Throws, naming the cause.
// Otherwise every case would fail the same way, for a reason that is not the variant's.
void check_ready_to_run(bool on_cuda, const CheckpointImplementation& oracle, const CheckpointImplementation& sut);

}  // namespace recheck
