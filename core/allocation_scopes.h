// Which checkpoint call an allocation belongs to: the interpreter's scope stack and the hooks
// that bracket a checkpoint's backward (docs/memory.md, "Scopes"). Used by core/interpreter.cpp.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/function_hook.h>

#include "core/memory.h"

namespace recheck {

// The scope stack the allocation log reads (memory::set_allocation_scope): every checkpoint
// call's forward and backward is a scope, named by site and numbered in the order they began.
// Shared with the hooks on checkpoint nodes, which may outlive the interpreter.
struct AllocationScopes {
  bool active = false;
  std::vector<std::string> names{"outside checkpoints"};
  std::map<std::string, int> calls;  // per "site phase", how many have begun
  std::vector<int> stack{0};

  void enter(const std::string& site, const char* phase) {
    if (!active) return;
    const std::string key = site + " " + phase;
    names.push_back(key + " #" + std::to_string(++calls[key]));
    stack.push_back(static_cast<int>(names.size()) - 1);
    memory::set_allocation_scope(stack.back());
  }
  void leave() {
    if (!active || stack.size() <= 1) return;
    stack.pop_back();
    memory::set_allocation_scope(stack.back());
  }
  void reset() {
    names.resize(1);
    calls.clear();
    stack.assign(1, 0);
    memory::set_allocation_scope(0);
  }
};

// A checkpoint's backward, from its node's pre-hook to its post-hook. A backward that raises
// never reaches the post-hook; the run stops there and the next iteration resets the stack.
struct EnterBackward final : torch::autograd::FunctionPreHook {
  EnterBackward(std::shared_ptr<AllocationScopes> scopes, std::string site) : scopes(std::move(scopes)), site(std::move(site)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    scopes->enter(site, "backward");
    return grads;
  }
  std::shared_ptr<AllocationScopes> scopes;
  std::string site;
};
struct LeaveBackward final : torch::autograd::FunctionPostHook {
  explicit LeaveBackward(std::shared_ptr<AllocationScopes> scopes) : scopes(std::move(scopes)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grad_inputs,
                                            const torch::autograd::variable_list&) override {
    scopes->leave();
    return grad_inputs;
  }
  std::shared_ptr<AllocationScopes> scopes;
};

}  // namespace recheck
