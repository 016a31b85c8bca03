// The training loop's differentiation of the loss, as the case asks for it (Case::backward).
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "core/case.h"

namespace recheck {

// backward (every leaf, or the leaves `how.inputs` names) or torch.autograd.grad, once or twice
// with the graph retained. What torch.autograd.grad returns is added into `returned`, one
// tensor per leaf (undefined where no gradient came); backward leaves `returned` as it is.
void differentiate(const Backward& how, const at::Tensor& loss, const std::vector<at::Tensor>& leaves,
                   std::vector<at::Tensor>& returned);

}  // namespace recheck
