// The subjects the Python bridge declares, one folder each (docs/adding-a-subject.md): each
// folder's register function adds its variants' aliases, embeds its Python module and
// registers its Subject. register_bridge calls register_bridge_subjects.
#pragma once

#include <string>
#include <vector>

#include "python/bridge.h"
#include "suts/subject.h"

namespace recheck::python {

// Registers a Python subject (python/registry.cpp): embeds its module, adds an alias per variant
// and registers `subject` with an implementation per variant, each made by make_checkpoint. A
// variant the subject names as its change or oracle is that; the others are mutants (made from
// `mutants_made_from`) or equivalent rewrites by their description's first word ("mutant: ",
// "equivalent: "), each differing by its function `MODULE.ATTR` (none for the oracle).
void register_python_subject(const EmbeddedModule& module, const std::vector<Alias>& variants, Subject subject,
                             const std::string& mutants_made_from);

void register_torch_non_reentrant();  // python/torch_non_reentrant/: PyTorch's non-reentrant checkpoint
void register_megatron_without_output();  // python/megatron_without_output/: Megatron's CheckpointWithoutOutput

// Every one above.
inline void register_bridge_subjects() {
  register_torch_non_reentrant();
  register_megatron_without_output();
}

}  // namespace recheck::python
