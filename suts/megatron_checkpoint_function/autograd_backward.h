// torch.autograd.backward as Megatron's backward calls it from Python: Python's torch checks the
// gradients against the outputs itself (torch/autograd/__init__.py, _make_grads) before the
// autograd engine runs, with its own message. libtorch's engine finds the same mistake later and
// words it otherwise ("invalid gradient at index 0 - got [3, 3] but expected shape compatible
// with [9]"), so the port checks first, as Python does.
#pragma once

#include <torch/torch.h>

namespace recheck {

// Raises Python's RuntimeError ("Mismatch in shape: grad_output[i] has a shape of
// torch.Size([..]) and output[j] has a shape of torch.Size([..]).") for the first gradient whose
// shape is not its output's, then runs the engine (keeping the graph for another backward when
// `retain_graph`).
void python_autograd_backward(const torch::autograd::variable_list& outputs,
                              const torch::autograd::variable_list& grads, bool retain_graph = false);

}  // namespace recheck
