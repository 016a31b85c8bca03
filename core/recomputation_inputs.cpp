#include "core/recomputation_inputs.h"

#include <algorithm>
#include <unordered_set>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include "core/holders.h"

namespace recheck {

namespace {

struct MarkReturned final : torch::autograd::FunctionPostHook {
  explicit MarkReturned(std::shared_ptr<bool> returned) : returned(std::move(returned)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grad_inputs,
                                            const torch::autograd::variable_list&) override {
    *returned = true;
    return grad_inputs;
  }
  std::shared_ptr<bool> returned;
};

}  // namespace

void RecomputationInputs::clear() {
  watched_.clear();
  produced_->clear();
}

RecomputationInputs::CallerTensors RecomputationInputs::caller_tensors(const Values& args) {
  CallerTensors callers;
  for (const Value& arg : args) {
    if (is_tensor(arg)) callers.emplace_back(as_tensor(arg).getIntrusivePtr());
  }
  return callers;
}

void RecomputationInputs::watch(const std::string& site, const Values& inputs, const std::shared_ptr<bool>& returned,
                                const CallerTensors& callers) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_tensor(inputs[i])) continue;
    const at::Tensor& input = as_tensor(inputs[i]);
    const bool callers_own = std::any_of(callers.begin(), callers.end(), [&](const auto& caller) {
      return caller.lock().get() == input.unsafeGetTensorImpl();
    });
    if (callers_own) continue;
    const std::string where = site + " input " + std::to_string(i);
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> weak(input.getIntrusivePtr());
    watched_.push_back(Watched{where, std::move(weak), returned});
    if (input.requires_grad()) {
      // The gradient autograd hands this input (which it stores as its .grad), watched by a
      // weak reference to its storage; the hook keeps no reference to the gradient.
      std::shared_ptr<std::vector<Produced>> produced = produced_;
      input.register_hook([produced, where](const at::Tensor& grad) {
        if (grad.defined()) produced->push_back(Produced{where, grad.storage().getWeakStorageImpl()});
      });
    }
  }
}

void RecomputationInputs::mark_when_backward_returns(const Values& outputs, const std::shared_ptr<bool>& returned) {
  std::unordered_set<torch::autograd::Node*> hooked;
  for (const Value& output : outputs) {
    if (!is_tensor(output)) continue;
    const torch::autograd::AutogradMeta* meta = torch::autograd::impl::get_autograd_meta(as_tensor(output));
    if (meta == nullptr || !meta->grad_fn_ || !hooked.insert(meta->grad_fn_.get()).second) continue;
    meta->grad_fn_->add_post_hook(std::make_unique<MarkReturned>(returned));
  }
}

namespace {

// `.grad` of a watched input; undefined, and without autograd's warning about reading it, for a
// tensor whose .grad autograd never fills (a non-leaf that does not retain it: a nested
// checkpoint's argument computed in the recomputation of the one around it, under PyTorch's
// non-reentrant checkpoint, which hands its recomputation such tensors as they are).
at::Tensor grad_of(const at::Tensor& input) {
  if (!input.is_leaf() && !input.retains_grad()) return at::Tensor();
  return input.grad();
}

}  // namespace

std::vector<std::string> RecomputationInputs::holding_grad(bool returned_only) const {
  std::vector<std::string> held;
  for (const Watched& w : watched_) {
    if (returned_only && !*w.returned) continue;
    auto impl = w.input.lock();
    if (!impl) continue;
    const at::Tensor input(std::move(impl));
    const at::Tensor grad = grad_of(input);
    if (!grad.defined()) continue;
    held.push_back(w.where + ": .grad of " + std::to_string(grad.storage().nbytes()) + " bytes");
  }
  return held;
}

std::vector<AliveInput> RecomputationInputs::alive(const std::vector<std::pair<std::string, at::Tensor>>& stashes) const {
  std::vector<AliveInput> alive;
  for (const Watched& w : watched_) {
    auto impl = w.input.lock();
    if (!impl) continue;
    const at::Tensor input(std::move(impl));
    const at::Tensor grad = grad_of(input);
    alive.push_back(AliveInput{w.where, static_cast<int64_t>(input.storage().nbytes()),
                               grad.defined() ? static_cast<int64_t>(grad.storage().nbytes()) : 0,
                               who_holds(input, stashes)});
  }
  return alive;
}

std::vector<std::string> RecomputationInputs::gradients_held_elsewhere(const std::vector<at::Tensor>& case_leaves) const {
  std::unordered_set<const c10::StorageImpl*> accounted;
  for (const at::Tensor& leaf : case_leaves) {
    if (leaf.grad().defined()) accounted.insert(leaf.grad().storage().unsafeGetStorageImpl());
  }
  for (const Watched& w : watched_) {
    auto impl = w.input.lock();
    if (!impl) continue;
    const at::Tensor input(std::move(impl));
    if (const at::Tensor grad = grad_of(input); grad.defined()) accounted.insert(grad.storage().unsafeGetStorageImpl());
  }
  std::vector<std::string> held;
  for (const Produced& p : *produced_) {
    auto storage = p.storage.lock();
    if (!storage || accounted.count(storage.get())) continue;
    held.push_back(p.where + ": gradient of " + std::to_string(storage->nbytes()) + " bytes held elsewhere");
  }
  return held;
}

int64_t RecomputationInputs::release_grads() {
  int64_t released = 0;
  for (const Watched& w : watched_) {
    auto impl = w.input.lock();
    if (!impl) continue;
    const at::Tensor input(std::move(impl));
    if (!grad_of(input).defined()) continue;
    at::Tensor& grad = input.mutable_grad();
    grad.reset();
    ++released;
  }
  return released;
}

}  // namespace recheck
