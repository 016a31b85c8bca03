// The data a case's runs start from and the weights of its loss: deterministic in the case's
// seed, the same for the eager run, the oracle's and the sut's.
#pragma once

#include <cstddef>
#include <vector>

#include <ATen/ATen.h>

#include "core/case.h"

namespace recheck {

// The device a case runs on.
at::Device device_of(const Case& c);

// The leaf tensors a run starts from: deterministic in the case's seed.
std::vector<at::Tensor> make_leaves(const Case& c);

// The loss weight of the root's output `output_index`: fixed random values from the case's seed,
// in the output's dtype and device (the loss is the sum of weight * output over the outputs that
// require grad).
at::Tensor loss_weight(const Case& c, size_t output_index, const at::Tensor& output);

}  // namespace recheck
