// The Python bridge: Python checkpoint implementations as recheck variants, run in an embedded
// CPython next to the C++ oracle and eager mode. Built only with -DRECHECK_PYTHON=ON, against
// the libtorch of the Python torch it embeds (see docs/python.md).
//
// Variant names it adds to make_checkpoint:
//   python:MODULE:ATTR           ATTR of MODULE, called Megatron's way
//                                (ATTR.apply(run_function, distribute_saved_activations, *args)
//                                for an autograd Function, ATTR(run_function, distribute, *args)
//                                for a function), or PyTorch's way when MODULE is
//                                torch.utils.checkpoint (ATTR(run_function, *args,
//                                use_reentrant=True));
//   python-clearing:MODULE:ATTR  the PR's change wrapped around a Megatron-style Function: the
//                                tensors each backward call detaches are recorded, and their
//                                .grad reset once that call has returned;
//   megatron-py, megatron-py-clearing, torch-py: the three above for
//   megatron.core.tensor_parallel.random:CheckpointFunction and torch.utils.checkpoint:checkpoint.
#pragma once

#include <string>
#include <vector>

namespace recheck::python {

// Registers the names above with make_checkpoint. The interpreter starts on first use.
void register_bridge();

// The short names and what they stand for, for `recheck variants`.
struct Alias {
  std::string name;
  std::string spec;
  std::string description;
};
const std::vector<Alias>& aliases();

}  // namespace recheck::python
