// Runs a case with one checkpoint implementation and records what happened: the data that
// every property reads. Eager, oracle and sut runs are this one function with a different
// implementation; each starts from the same leaf data and the same RNG states.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/case.h"
#include "core/errors.h"
#include "core/checkpoint_interface.h"
#include "core/discards.h"
#include "core/leaves.h"
#include "core/memory.h"
#include "core/op_trace.h"
#include "core/rng.h"
#include "core/torch_compat.h"

namespace recheck {

// Bytes, measured by the CPU counting allocator or CUDA's caching allocator statistics.
struct MemoryRecord {
  bool measured = false;
  int64_t floor = 0;  // held after the iteration: leaves, their .grad, what stash ops keep alive
  int64_t peak = 0;   // the most held at any moment of the iteration
  // What letting go of the .grad of every recomputation input still alive after the iteration
  // frees, measured (after the floor was read) by letting go of them: what clearing saves at
  // the floor, whatever keeps those inputs alive (docs/memory.md, "The floor clearing saves").
  int64_t released_bytes = 0;
  int64_t released_grads = 0;  // how many .grad were let go
};

// Every allocation of an iteration, by the scope it was made in: a checkpoint's forward or
// backward call ("root.ops[2] backward #1", numbered in the order they ran) or "outside
// checkpoints"; each scope's sizes in ascending order.
struct AllocationRecord {
  bool measured = false;
  std::map<std::string, std::vector<int64_t>> by_scope;
};

struct ErrorRecord {
  int iteration = 0;
  std::string phase;  // "forward" or "backward"
  RaisedError error;
  rng::Snapshot rng;  // the states when the error reached the caller
  rng::Snapshot rng_at_phase_start;  // the states when forward or backward began
  // How far the iteration got: the ops it had completed (forward's, and recomputations') when
  // the error reached the caller. Two runs of one case that raise different errors in the same
  // phase: the one with more ops completed raised at a point the other never reached.
  int64_t ops_completed = 0;
  // The innermost op that was running when it raised (its OpSite number), and whether inside a
  // recomputation; -1 when no op of the case was (autograd's own checks in backward, say).
  int raised_by_op = -1;
  bool raised_in_recomputation = false;
};

// What a stash op keeps, as the user who stashed it finds it after the iteration (before recheck
// lets go of the recomputation inputs' .grad): in a checkpoint's body, the value of its last call,
// which after backward is the recomputation's (a detached input, or what the body made of one).
struct StashRecord {
  std::string site;           // the stash op, e.g. "root.ops[2].body.ops[1]"
  int op = -1;                // its number in the run's trace (OpExecution::op); -1 without one
  bool tensor = false;        // a tensor; otherwise `value` names what was stashed
  std::string value;          // a non-tensor: its type and value ("int 3", "None")
  bool requires_grad = false;
  bool is_leaf = false;
  int64_t version = 0;        // the tensor's version counter (`_version`)
  at::Tensor data;            // cloned
  at::Tensor grad;            // its .grad, cloned; undefined when it has none
};

// A recomputation input still alive after an iteration, and what keeps it (core/holders.h).
struct AliveInput {
  std::string where;  // "root.ops[1] input 0"
  int64_t storage_bytes = 0;
  int64_t grad_bytes = 0;  // its .grad's; 0 without one
  std::string held_by;
  std::string describe() const;  // "root.ops[1] input 0 (512 B, .grad 512 B), held by the stash ..."
};

// One call of the hook a hook op hung (core/case.h Hook), in the order the calls came.
struct HookCall {
  std::string site;  // the hook op, "root.ops[2].body.ops[0]"
  // Whether the op that hung it ran in a recomputation (else in forward, or outside checkpoints).
  bool hung_in_recomputation = false;
  at::Tensor grad;  // the gradient it was called with, cloned
};

// The state of one module a case's state ops name (core/case.h ModuleState), as an iteration
// left it.
struct ModuleRecord {
  int module = 0;
  double running_mean = 0;
  int64_t steps = 0;    // the step counter
  int64_t updates = 0;  // how many state ops ran on it, of either fn, since the run began
  bool operator==(const ModuleRecord& o) const {
    return module == o.module && steps == o.steps && updates == o.updates &&
           std::memcmp(&running_mean, &o.running_mean, sizeof running_mean) == 0;  // bit for bit, NaN too
  }
};

// One iteration of a run: what it computed, and the state it left. An iteration that raised
// (`error` set) has no outputs or loss; its leaves, RNG states, flag and recomputation inputs
// are the state the error left, as the caller sees it once the exception reached it.
struct IterationRecord {
  std::vector<at::Tensor> outputs;     // the root's outputs, cloned; undefined for non-tensors
  at::Tensor loss;                     // undefined when no output required grad
  std::vector<at::Tensor> leaf_grads;  // `.grad` of each leaf after backward, cloned
  std::vector<at::Tensor> leaf_data;   // each leaf's data after backward, cloned
  rng::Snapshot rng;
  bool checkpointing_flag = false;
  compat::AutocastStates autocast;  // the autocast state after the iteration (or the error)
  MemoryRecord memory;
  AllocationRecord allocations;
  // Every recomputation input still alive after the iteration that holds a `.grad`, as
  // "root.ops[2] input 0: .grad of 48 bytes" (watched through weak references).
  std::vector<std::string> detached_inputs_holding_grad;
  // Every gradient that autograd handed a recomputation input and that is still alive although
  // neither a leaf's .grad nor a live recomputation input holds it (weak references).
  std::vector<std::string> gradients_held_elsewhere;
  // What every stash op that ran keeps, in the case's order of its ops; after an error too.
  std::vector<StashRecord> stashed;
  // Every checkpoint a discard op named in this iteration, in the order the discards ran; after
  // an error too (then the outputs as the error left them).
  std::vector<DiscardRecord> discards;
  // Every call of a hook the iteration's hook ops hung, in order; after an error too (the calls
  // made before it).
  std::vector<HookCall> hook_calls;
  // The state of every module the case's state ops name, by module number, after the iteration
  // (after an error too: as the error left it).
  std::vector<ModuleRecord> modules;
  // Every recomputation input still alive after an iteration that completed, and what holds it,
  // recorded before the harness lets go of their .grad (MemoryRecord::released_bytes).
  std::vector<AliveInput> alive_inputs;
  // Every checkpoint without output whose object is still alive after an iteration that completed,
  // as "root.ops[0] of iteration 0" (KeptOutputs::watch): one whose hook never fired can outlive
  // its iteration (Megatron's keeps itself alive through the hook on its own output). Empty where
  // the code made no object of its own.
  std::vector<std::string> alive_checkpoints;
  // Set when the iteration raised. After an error only the recomputation inputs of checkpoint
  // calls whose backward returned are listed above (those of a backward the error cut short
  // were never collected, so the change has nothing to clear), gradients_held_elsewhere is
  // empty, and memory and allocations are not measured.
  std::optional<ErrorRecord> error;
};

// One execution of a checkpoint op: the outputs of every call of its body. Call 0 is the
// forward; later calls are recomputations.
struct SegmentCall {
  std::string site;  // e.g. "root.ops[2]"
  int iteration = 0;
  std::vector<std::vector<at::Tensor>> calls;
  // The autocast state each call started in, one that raised included (then the last, with no
  // outputs above): a recomputation must see forward's.
  std::vector<compat::AutocastStates> autocast;
  // is_checkpointing() as each call's body saw it: before each of the body's own ops (body.ops[n]
  // is reading n) and once the last returned (reading ops.size()); not inside a region or a
  // nested checkpoint: the flag is one global, and the body's next op reads what they left. A
  // call that raised keeps the readings it made. Empty where the implementation keeps no flag.
  std::vector<std::vector<bool>> flag_reads;
};

struct Observations {
  std::string implementation;
  std::string code;    // CheckpointImplementation::code()
  std::string device;  // "cpu" or "cuda"
  // Every iteration that ran, in order, the one that raised included: a case that stops at an
  // error (the default) has no record after it, one that goes on after errors
  // (Case::continue_after_error) has one for each.
  std::vector<IterationRecord> iterations;
  // The tracker's states as the implementation's own seeding left them, before the first
  // iteration: the reference for a state it adds that eager mode's tracker does not keep
  // (rng-restored judges a tracker by what its states do, not by the port's list of names).
  std::map<std::string, std::vector<uint8_t>> tracker_seeded;
  bool keeps_checkpointing_flag = true;  // CheckpointImplementation::keeps_checkpointing_flag
  std::optional<ErrorRecord> error;  // the first error (also in its iteration's record)
  std::vector<SegmentCall> segment_calls;
  // Every op execution's fingerprints, in the order they returned (RunOptions::record_op_trace).
  std::vector<OpExecution> trace;
  int64_t op_executions = 0;
  // The last iteration's allocations and frees on CPU, marked where forward, each checkpoint's
  // recomputation and backward begin (RunOptions::record_timeline).
  memory::Timeline timeline;
};

struct RunOptions {
  bool record_segment_calls = true;
  // Observations::trace; on CPU only (a fingerprint on a device would wait for it at every op).
  // Off, check_case (properties/report.h) gives no cause signatures either: `recheck bench`'s
  // baseline for what triage costs.
  bool record_op_trace = true;
  // The case's op index for the trace, when the caller runs a case several times (check_case);
  // null: each run makes its own.
  std::shared_ptr<const TraceIndex> trace_index;
  bool measure_memory = true;   // CPU: installs the counting allocator for the run
  bool record_timeline = false;
  int64_t cpu_memory_budget = 0;  // bytes; on CPU, allocations beyond it raise OutOfMemoryError
};

Observations run_case(const Case& c, CheckpointImplementation& implementation,
                      const RunOptions& options = {});

// The most elements a value an op makes may have at run time: the leaf_elements a command read
// its cases under (default Limits{}.leaf_elements). Validation holds every value to it by eager
// mode's shapes; a distribute checkpoint leaves its first argument flattened after forward,
// and an op that broadcasts it could make far more. Such an op raises MemoryError before it
// allocates, so its case is skipped as too large. Process-wide; workers inherit it.
void set_value_element_limit(int64_t elements);

// Turns on libtorch's deterministic algorithms (an op with no deterministic implementation
// raises instead of varying) and sets CUBLAS_WORKSPACE_CONFIG=:4096:8 when unset, which cuBLAS
// needs for deterministic matmuls. recheck's programs call it at start, before CUDA is
// initialized; run_case sets the flag again, for embedders and tests.
void use_deterministic_algorithms();

}  // namespace recheck
