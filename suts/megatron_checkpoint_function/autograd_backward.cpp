#include "suts/megatron_checkpoint_function/autograd_backward.h"

#include <string>

#include "core/errors.h"

namespace recheck {

namespace {

using torch::autograd::variable_list;

std::string python_size(at::IntArrayRef sizes) {
  std::string text = "torch.Size([";
  for (size_t i = 0; i < sizes.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(sizes[i]);
  return text + "])";
}

// Python's `items.index(items[position])`: the first element that is it or equals it. Tensors
// compare by `==`, elementwise, and the result's truth is asked: a one-element result is its
// value, any other raises, and shapes that do not broadcast raise (the error the op gives).
size_t python_index(const variable_list& items, size_t position) {
  const at::Tensor& wanted = items[position];
  for (size_t j = 0; j < position; ++j) {
    const at::Tensor& item = items[j];
    if (!item.defined() || !wanted.defined()) continue;  // None == tensor is False
    if (item.is_same(wanted)) return j;
    const at::Tensor equal = at::eq(item, wanted);
    if (equal.numel() == 0) throw PythonError("RuntimeError", "Boolean value of Tensor with no values is ambiguous");
    if (equal.numel() > 1) {
      throw PythonError("RuntimeError", "Boolean value of Tensor with more than one value is ambiguous");
    }
    if (equal.item<bool>()) return j;
  }
  return position;
}

}  // namespace

void python_autograd_backward(const variable_list& outputs, const variable_list& grads, bool retain_graph) {
  for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i) {
    if (!grads[i].defined() || outputs[i].sizes() == grads[i].sizes()) continue;
    // In Python's order: the gradient's index, then the output's; either may raise instead.
    const size_t grad_index = python_index(grads, i);
    const std::string grad_shape = python_size(grads[i].sizes());
    const size_t output_index = python_index(outputs, i);
    throw PythonError("RuntimeError", "Mismatch in shape: grad_output[" + std::to_string(grad_index) +
                                          "] has a shape of " + grad_shape + " and output[" +
                                          std::to_string(output_index) + "] has a shape of " +
                                          python_size(outputs[i].sizes()) + ".");
  }
  torch::autograd::backward(outputs, grads, retain_graph);
}

}  // namespace recheck
