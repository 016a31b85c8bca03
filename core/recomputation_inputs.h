// The recomputation inputs of one iteration, watched without keeping them alive: which still
// hold a .grad after it, what holds those still alive, where the gradients autograd handed them
// went, and letting go of their .grad (what clearing saves). The interpreter watches every call
// of a checkpoint's body after its first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "core/interpreter.h"
#include "core/value.h"

namespace recheck {

class RecomputationInputs {
 public:
  void clear();

  // The tensors a checkpoint call was given, by weak reference: who they are, without keeping
  // them alive.
  using CallerTensors = std::vector<c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>>;
  static CallerTensors caller_tensors(const Values& args);

  // Watches the tensor inputs of a recomputation of the checkpoint at `site`; `returned` turns
  // true when that call's backward returns (mark_when_backward_returns). An input that is one of
  // `callers` itself is not watched: a checkpoint may hand its recomputation the caller's own
  // tensors (PyTorch's non-reentrant one does), whose .grad is the caller's, not an input it
  // made for the recomputation (Megatron's detached copies).
  void watch(const std::string& site, const Values& inputs, const std::shared_ptr<bool>& returned,
             const CallerTensors& callers);

  // Sets `returned` from a post-hook on the nodes of a checkpoint call's outputs, which a
  // backward that raises never reaches.
  static void mark_when_backward_returns(const Values& outputs, const std::shared_ptr<bool>& returned);

  // Every input still alive that holds a .grad, as "root.ops[2] input 0: .grad of 48 bytes";
  // `returned_only`: only those of calls whose backward returned (after an error, those of a
  // backward it cut short were never collected).
  std::vector<std::string> holding_grad(bool returned_only) const;

  // Every input still alive, and what holds it among `stashes` (site, tensor kept): core/holders.h.
  std::vector<AliveInput> alive(const std::vector<std::pair<std::string, at::Tensor>>& stashes) const;

  // Every gradient storage autograd handed an input that is still alive although neither a
  // case leaf's .grad nor a live input's .grad holds it, as "root.ops[2] input 0: gradient of
  // 48 bytes held elsewhere".
  std::vector<std::string> gradients_held_elsewhere(const std::vector<at::Tensor>& case_leaves) const;

  // Lets go of the .grad of every input still alive (MemoryRecord::released_bytes); returns how
  // many it let go.
  int64_t release_grads();

 private:
  struct Watched {
    std::string where;
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> input;
    std::shared_ptr<bool> returned;
  };
  struct Produced {
    std::string where;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  };
  std::vector<Watched> watched_;
  // Shared with the hooks that fill it, which may outlive an iteration's watch.
  std::shared_ptr<std::vector<Produced>> produced_ = std::make_shared<std::vector<Produced>>();
};

}  // namespace recheck
