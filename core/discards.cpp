#include "core/discards.h"

#include <algorithm>
#include <stdexcept>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "core/memory.h"

namespace recheck {

namespace {

int64_t storage_bytes(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? static_cast<int64_t>(t.storage().nbytes()) : 0;
}

// The harness's copy of what `t` holds now; undefined where its storage no longer holds it.
at::Tensor copy_if_allocated(const at::Tensor& t) {
  if (!t.defined() || !data_allocated(t)) return at::Tensor();
  memory::Uncounted uncounted;
  return t.detach().to(at::kCPU).clone();
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  memory::Uncounted uncounted;
  return at::equal(a.contiguous().reshape({-1}).view(at::kByte), b.contiguous().reshape({-1}).view(at::kByte));
}

bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.has_storage() && b.has_storage() &&
         a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

// Counts, through a weak reference, the calls of the node it is added to.
class CountingPostHook : public torch::autograd::FunctionPostHook {
 public:
  explicit CountingPostHook(std::weak_ptr<int> count) : count_(std::move(count)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    if (const auto count = count_.lock()) ++*count;
    return outputs;
  }

 private:
  std::weak_ptr<int> count_;
};

// How often backward computes `hook`'s gradient from now on. A leaf's is counted after its
// accumulator node ran, not with a tensor hook: on a leaf, a hook registered from Python (the
// implementation's recomputation) and one registered from C++ replace each other (torch keeps a
// leaf's Python hooks in a dict it installs in place of the tensor's hooks), so either the count
// or the implementation's own hook would be lost.
std::shared_ptr<int> count_gradients_reaching(const at::Tensor& hook) {
  if (!hook.requires_grad()) return std::make_shared<int>(0);
  if (!hook.is_leaf()) {
    auto calls = std::make_shared<int>(0);
    hook.register_hook([calls](const at::Tensor&) { ++*calls; });
    return calls;
  }
  // The count shares its life with the accumulator it watches (kept until the record is taken).
  struct Watched {
    int calls = 0;
    std::shared_ptr<torch::autograd::Node> accumulator;
  };
  auto watched = std::make_shared<Watched>();
  watched->accumulator = torch::autograd::impl::grad_accumulator(hook);
  std::shared_ptr<int> calls(watched, &watched->calls);
  watched->accumulator->add_post_hook(std::make_unique<CountingPostHook>(calls));
  return calls;
}

}  // namespace

bool data_allocated(const at::Tensor& t) {
  if (t.numel() == 0) return true;
  if (!t.has_storage() || t.storage().data() == nullptr) return false;
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return (last + 1) * static_cast<int64_t>(t.element_size()) <= static_cast<int64_t>(t.storage().nbytes());
}

std::shared_ptr<KeptCheckpoint> Discards::keep(std::string site, std::shared_ptr<KeptOutputs> handle,
                                               std::shared_ptr<int> calls, const Values& outputs) {
  auto kept = std::make_shared<KeptCheckpoint>();
  kept->site = std::move(site);
  kept->handle = std::move(handle);
  kept->calls = std::move(calls);
  kept->outputs = outputs;
  for (const Value& output : outputs) {
    const at::Tensor t = is_tensor(output) ? as_tensor(output) : at::Tensor();
    kept->forward.push_back(copy_if_allocated(t));
    kept->forward_storage_bytes.push_back(storage_bytes(t));
  }
  return kept;
}

void Discards::discard(const Discard& op, const std::string& site, const Values& values,
                       const std::map<int, std::shared_ptr<KeptCheckpoint>>& kept,
                       CheckpointImplementation& implementation) {
  std::vector<std::shared_ptr<KeptCheckpoint>> named;
  for (int ref : op.checkpoints) {
    const auto found = kept.find(ref);
    if (found == kept.end()) {
      throw std::logic_error("discard at " + site + ": v" + std::to_string(ref) + " is not a checkpoint without output");
    }
    named.push_back(found->second);
  }
  const int first = *std::min_element(op.checkpoints.begin(), op.checkpoints.end());
  // The caller's tensors: every value before the first checkpoint named, and every later one
  // that shares no storage with an output named (a view of an output is the output's).
  struct Held {
    int value;
    at::Tensor tensor;
    int64_t bytes;
    at::Tensor data;
  };
  std::vector<Held> held;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!is_tensor(values[i]) || !as_tensor(values[i]).defined()) continue;
    const at::Tensor& t = as_tensor(values[i]);
    const bool of_an_output = static_cast<int>(i) >= first &&
                              std::any_of(named.begin(), named.end(), [&](const std::shared_ptr<KeptCheckpoint>& k) {
                                return std::any_of(k->outputs.begin(), k->outputs.end(), [&](const Value& o) {
                                  return is_tensor(o) && shares_storage(t, as_tensor(o));
                                });
                              });
    if (!of_an_output) held.push_back({static_cast<int>(i), t, storage_bytes(t), copy_if_allocated(t)});
  }

  std::vector<std::shared_ptr<KeptOutputs>> handles;
  for (const auto& k : named) handles.push_back(k->handle);
  const at::Tensor& hook = as_tensor(values.at(op.hook));  // a tensor: validate()
  const std::shared_ptr<int> hook_calls = count_gradients_reaching(hook);
  implementation.discard_outputs(handles, hook);

  std::vector<std::string> touched;
  for (const Held& h : held) {
    const int64_t bytes = storage_bytes(h.tensor);
    const std::string name = "v" + std::to_string(h.value);
    if (bytes != h.bytes) {
      touched.push_back(name + ": storage " + std::to_string(h.bytes) + " -> " + std::to_string(bytes) + " bytes");
    } else if (!same_bits(copy_if_allocated(h.tensor), h.data)) {
      touched.push_back(name + ": data changed");
    }
  }
  for (const auto& k : named) {
    DiscardRecord record;
    record.site = site;
    record.checkpoint = k->site;
    record.touched = touched;
    for (size_t o = 0; o < k->outputs.size(); ++o) {
      if (is_tensor(k->outputs[o]) && storage_bytes(as_tensor(k->outputs[o])) < k->forward_storage_bytes[o]) record.freed = true;
    }
    discarded_.push_back({std::move(record), k, hook_calls});
  }
}

void Discards::watch(const std::string& site, int iteration, const KeptOutputs& handle) {
  if (std::shared_ptr<KeptOutputs::Watch> w = handle.watch()) {
    watched_.push_back({site + " of iteration " + std::to_string(iteration), std::move(w)});
  }
}

std::vector<std::string> Discards::alive_objects() const {
  std::vector<std::string> alive;
  for (const Watched& w : watched_) {
    if (w.watch->alive()) alive.push_back(w.where);
  }
  return alive;
}

std::vector<DiscardRecord> Discards::finish() {
  std::vector<DiscardRecord> records;
  for (auto& [record, kept, hook_calls] : discarded_) {
    record.recomputations = std::max(0, *kept->calls - 1);
    record.hook_reached = *hook_calls > 0;
    record.forward = kept->forward;
    record.forward_storage_bytes = kept->forward_storage_bytes;
    for (const Value& output : kept->outputs) {
      const at::Tensor t = is_tensor(output) ? as_tensor(output) : at::Tensor();
      record.after.push_back(copy_if_allocated(t));
      record.after_storage_bytes.push_back(storage_bytes(t));
    }
    records.push_back(std::move(record));
  }
  discarded_.clear();
  return records;
}

}  // namespace recheck
