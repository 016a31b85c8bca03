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
//   megatron.core.tensor_parallel.random:CheckpointFunction and torch.utils.checkpoint:checkpoint;
//   and the names of each subject's variants (python/subjects.h).
#pragma once

#include <string>
#include <vector>

namespace recheck::python {

// Registers the names above with make_checkpoint, and the subjects (once: later calls do
// nothing). The interpreter starts on first use.
void register_bridge();

// The short names and what they stand for, for `recheck variants`: megatron-py,
// megatron-py-clearing and torch-py, then those each subject adds (add_alias, before
// register_bridge registers them all).
struct Alias {
  std::string name;
  std::string spec;
  std::string description;
};
const std::vector<Alias>& aliases();
void add_alias(Alias alias);  // replaces one of the same name

// A Python module recheck carries, embedded at build time (a subject's variants): installed in
// sys.modules under `name` when the interpreter starts, so that variant specs can name it.
struct EmbeddedModule {
  std::string name;    // recheck_torch_non_reentrant
  std::string file;    // where its source sits in recheck's tree, for provenance
  const char* source;  // the module's text
};
const std::vector<EmbeddedModule>& embedded_modules();
void embed_module(EmbeddedModule module);  // before the interpreter starts; replaces one of the same name

}  // namespace recheck::python
