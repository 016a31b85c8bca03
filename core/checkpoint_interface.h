// The interface every checkpoint implementation plugs into, and the registry of variants made
// elsewhere (the Python bridge). The ground floor: the interpreter calls through it, and the
// C++ port (suts/), eager execution (oracles/) and Python code (python/) implement it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/value.h"

namespace recheck {

struct Case;
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

// Where a variant's code came from: name and value pairs (CheckpointImplementation::provenance).
using Provenance = std::vector<std::pair<std::string, std::string>>;

// A checkpointed segment's body, called once in forward and again to recompute in backward.
using RunFunction = std::function<Values(const Values&)>;

// An option a checkpoint function takes with each call besides its arguments (PyTorch's
// preserve_rng_state, early_stop, determinism_check, a selective policy): its name and the values
// generated cases draw from, each as the function's module spells it, the function's default
// first.
struct CallOption {
  std::string name;
  std::vector<std::string> values;
  // Values drawn only for a body that draws no random numbers, in all it nests: what the
  // function promises with them holds only there (preserve_rng_state=False).
  std::vector<std::string> only_without_rng;
};

// How the interpreter calls a checkpoint: Megatron's distribute_saved_activations, and the
// values of the implementation's own call options (Checkpoint::options in core/case.h).
struct CallSettings {
  bool distribute_saved_activations = false;
  std::map<std::string, std::string> options;
};

// What a checkpoint without output (Checkpoint::without_output) leaves with the implementation
// that ran it until the caller discards its outputs: Megatron's CheckpointWithoutOutput object.
class KeptOutputs {
 public:
  virtual ~KeptOutputs() = default;
  // Whether the object is still alive, asked without keeping it alive (a weak reference to
  // Megatron's CheckpointWithoutOutput, taken when it was made): the run records which are after
  // each iteration (IterationRecord::alive_checkpoints). Null where the code made no object of its
  // own (the C++ port).
  class Watch {
   public:
    virtual ~Watch() = default;
    virtual bool alive() const = 0;
  };
  virtual std::shared_ptr<Watch> watch() const { return nullptr; }
};

// What the interpreter calls for every checkpoint op. The C++ port's variants (suts/), eager
// execution (oracles/) and Python code (python/) all plug in here.
class CheckpointImplementation {
 public:
  virtual ~CheckpointImplementation() = default;
  virtual std::string name() const = 0;
  virtual Values apply(const RunFunction& run_function, const CallSettings& call, const Values& args) = 0;
  // Checkpoints without output: whether it runs them (generated cases for it draw them, and a case
  // holding one is refused otherwise: check_call_options), running one (the outputs, and what
  // discard_outputs needs of it), and discarding the outputs of some of them with one hook.
  virtual bool runs_without_output() const { return false; }
  // Whether its checkpoints without output take arguments that are not tensors (None, numbers,
  // strings), as Megatron-LM's since 2026 do; megatron-core 0.16.1's refuse them.
  virtual bool without_output_takes_non_tensors() const { return false; }
  virtual std::pair<Values, std::shared_ptr<KeptOutputs>> apply_without_output(const RunFunction& run_function,
                                                                               const CallSettings& call,
                                                                               const Values& args);
  virtual void discard_outputs(const std::vector<std::shared_ptr<KeptOutputs>>& kept, const at::Tensor& hook) {
    (void)kept;
    (void)hook;
  }
  // The options it takes with each call (none: Megatron's, eager execution); generated cases for
  // it draw them, and a case that passes another is refused (check_call_options).
  virtual std::vector<CallOption> call_options() const { return {}; }

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
  // Where its code came from, as name and value pairs, for the run's header, its JSON report
  // and each finding: a Python variant's module file, its package's version, the git commit of
  // a checkout it sits in, torch's and Python's versions. Empty for recheck's own C++ code.
  virtual Provenance provenance() const { return {}; }
  // What the environment must hold to replay a finding with it ("PYTHONPATH=..."), or "".
  virtual std::string replay_environment() const { return ""; }
  // Whether it can run a checkpoint that distributes its saved activations, on the device.
  virtual bool distributes(bool on_cuda) const {
    (void)on_cuda;
    return true;
  }
  // The tracker the case's tracker draws and fork ops use while this implementation runs;
  // null: recheck's own (core/rng.h).
  virtual const rng::TrackerHooks* tracker() const { return nullptr; }
  // The is-checkpointing flag this implementation keeps (Megatron's module global for a Python
  // variant), and putting it down before a run.
  virtual bool checkpointing_flag() const;
  virtual void reset_checkpointing_flag();
  // Whether it keeps one at all: a Megatron tree from before the flag, or another function
  // (PyTorch's checkpoint), keeps none, and flag-in-body says it was not checked.
  virtual bool keeps_checkpointing_flag() const { return true; }
  // Waits until work it started on threads of its own has let go of the run's tensors (a
  // collective, on gloo's worker thread), before recheck reads what the run holds: otherwise a
  // block freed a moment late would count as held.
  virtual void settle() {}
  // Called once in a process that is about to check cases (recheck run's worker), before the
  // first: throws, naming the cause, when the implementation cannot run in this process.
  virtual void check_process_ready(bool on_cuda) const { (void)on_cuda; }
};

// The variant registry. Variants from elsewhere: a name "PREFIX:..." goes to the factory
// registered for PREFIX (the Python bridge registers "python" and "python-clearing");
// make_checkpoint (suts/subject.h) asks here before it looks among the C++ port's variants.
using CheckpointFactory = std::function<std::unique_ptr<CheckpointImplementation>(const std::string& name)>;
void register_checkpoint_factory(const std::string& prefix, CheckpointFactory factory);
// Whether `name` names Python code by its module (python:MODULE:ATTR, python-clearing:...,
// python-change:...), and whether this process has the bridge that runs Python variants. The
// short names of Python variants (megatron-py, a Python subject's) are registered by the bridge:
// a build without it does not know them, and says so where it refuses one (make_checkpoint).
bool needs_python_bridge(const std::string& name);
bool python_bridge_built();
// Short names for registered ones ("megatron-py" for "python:megatron...").
void register_checkpoint_alias(const std::string& alias, const std::string& name);
// The implementation a registered factory makes for `name` (an alias resolved first), or null
// when no factory's prefix matches. Throws std::invalid_argument for a Python variant in a
// process without the bridge.
std::unique_ptr<CheckpointImplementation> make_registered_checkpoint(const std::string& name);
// `name` with an alias resolved.
std::string resolve_checkpoint_alias(const std::string& name);

// The global "is checkpointing" flag: set while a checkpoint's forward or backward runs.
bool is_checkpointing();
void set_checkpointing(bool value);

// Throws std::invalid_argument naming the first checkpoint of `c` that passes an option, or a
// value of one, that `implementation` does not declare (call_options), or that runs without
// output where it runs none (runs_without_output).
void check_call_options(const Case& c, const CheckpointImplementation& implementation);

// Provenance in one line, "name value, name value"; "" when empty.
std::string describe_provenance(const Provenance& provenance);

// Before a process checks its first case: the device works here (one small op; none for the
// CPU) and each implementation can run here (check_process_ready). Throws, naming the cause.
// Otherwise every case would fail the same way, for a reason that is not the variant's.
void check_ready_to_run(bool on_cuda, const CheckpointImplementation& oracle, const CheckpointImplementation& sut);

}  // namespace recheck
