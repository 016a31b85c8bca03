// The subjects the Python bridge declares, one folder each (docs/adding-a-subject.md): each
// folder's register function adds its variants' aliases, embeds its Python module and
// registers its Subject. register_bridge calls register_bridge_subjects.
#pragma once

namespace recheck::python {

void register_torch_non_reentrant();  // python/torch_non_reentrant/: PyTorch's non-reentrant checkpoint
void register_megatron_without_output();  // python/megatron_without_output/: Megatron's CheckpointWithoutOutput

// Every one above.
inline void register_bridge_subjects() {
  register_torch_non_reentrant();
  register_megatron_without_output();
}

}  // namespace recheck::python
