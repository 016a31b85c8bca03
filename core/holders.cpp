#include "core/holders.h"

#include <unordered_set>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

namespace recheck {

namespace {

// Whether the graph behind `root` has an AccumulateGrad of `target`.
bool graph_accumulates_into(const std::shared_ptr<torch::autograd::Node>& root, const c10::TensorImpl* target) {
  std::vector<torch::autograd::Node*> stack{root.get()};
  std::unordered_set<torch::autograd::Node*> seen;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (const auto* accumulate = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      if (accumulate->variable.unsafeGetTensorImpl() == target) return true;
    }
    for (const torch::autograd::Edge& edge : node->next_edges()) stack.push_back(edge.function.get());
  }
  return false;
}

}  // namespace

std::string who_holds(const at::Tensor& target, const std::vector<std::pair<std::string, at::Tensor>>& stashes) {
  const c10::TensorImpl* impl = target.unsafeGetTensorImpl();
  for (const auto& [site, kept] : stashes) {
    if (!kept.defined()) continue;
    if (kept.unsafeGetTensorImpl() == impl) return "the stash " + site;
    if (kept.is_view() && kept._base().unsafeGetTensorImpl() == impl) return "a view of it kept by the stash " + site;
  }
  for (const auto& [site, kept] : stashes) {
    // The node the tensor keeps, read without autograd's view checks: grad_fn() throws for a
    // view whose base changed in place after a custom Function made it, yet the view still
    // keeps that node, and the graph behind it.
    torch::autograd::AutogradMeta* meta = kept.defined() ? torch::autograd::impl::get_autograd_meta(kept) : nullptr;
    if (meta != nullptr && meta->grad_fn_ && graph_accumulates_into(meta->grad_fn_, impl)) {
      return "its AccumulateGrad, in the graph of the tensor the stash " + site + " keeps";
    }
  }
  return "nothing the case keeps (its stashes, the views and graphs behind them): the implementation under test";
}

}  // namespace recheck
