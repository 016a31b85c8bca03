#include "core/training_loop.h"

#include <torch/csrc/autograd/autograd.h>

namespace recheck {

void differentiate(const Backward& how, const at::Tensor& loss, const std::vector<at::Tensor>& leaves,
                   std::vector<at::Tensor>& returned) {
  std::vector<at::Tensor> inputs;
  for (int n : how.inputs) inputs.push_back(leaves.at(static_cast<size_t>(n)));
  const int calls = how.twice ? 2 : 1;
  for (int call = 0; call < calls; ++call) {
    const bool retain = call + 1 < calls;
    if (how.call == Backward::Call::backward) {
      torch::autograd::backward({loss}, {}, retain, /*create_graph=*/false, inputs);
      continue;
    }
    const std::vector<at::Tensor> grads =
        torch::autograd::grad({loss}, inputs, {}, retain, /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) continue;
      at::Tensor& kept = returned.at(static_cast<size_t>(how.inputs[k]));
      kept = kept.defined() ? kept + grads[k] : grads[k];
    }
  }
}

}  // namespace recheck
