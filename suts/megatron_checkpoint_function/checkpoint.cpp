#include "suts/megatron_checkpoint_function/checkpoint.h"

#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>

#include "core/errors.h"
#include "core/rng.h"
#include "core/torch_compat.h"
#include "suts/megatron_checkpoint_function/autograd_backward.h"

namespace recheck {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Everything Python keeps on `ctx` besides the saved tensors.
struct CheckpointCall : torch::CustomClassHolder {
  RunFunction run_function;
  bool distribute_saved_activations = false;
  CheckpointDecisions decisions;
  Values args;
  rng::AllStates rng_states;
  compat::AutocastStates autocast;  // where the autocast state is recorded: the state forward ran in
  std::vector<int64_t> input_0_shape;
  // The forward outputs with their tensors left out: C++ Functions return tensors only, so the
  // non-tensor outputs travel beside them and are merged back in order.
  Values outputs_without_tensors;
  std::vector<bool> output_is_tensor;
  // Arguments kept beside the saved tensors, by position: views that autograd's view+inplace
  // check already refuses (see CheckpointFunction::forward).
  std::vector<std::pair<size_t, at::Tensor>> views_saved_aside;
  // When there are such views: the other saved tensors' version counters and their versions
  // when saved, for backward to unpack in Python's order.
  struct SavedVersion {
    size_t position;
    c10::VariableVersion counter;
    uint32_t version;
  };
  std::vector<SavedVersion> saved_versions;
  // A call whose apply refuses a non-tensor argument (MegatronCheckpoint::apply): the outputs
  // that are arguments returned as they are, which Python's apply makes views of first.
  bool refuses_an_argument = false;
  std::vector<at::Tensor> arguments_returned_as_is;

  // Whether a tensor saved before `position` was modified in place since it was saved: Python,
  // unpacking ctx.saved_tensors in order, fails on its version check first.
  bool saved_tensor_modified_before(size_t position) const {
    for (const SavedVersion& saved : saved_versions) {
      if (saved.position < position && saved.counter.current_version() != saved.version) return true;
    }
    return false;
  }
};

// Whether asking the tensor for its grad_fn raises: a view whose base, or another view of it, was
// modified in place since it was made, when autograd cannot rebase it (made in a custom
// Function, in no_grad mode, or as one of several outputs).
bool grad_fn_raises(const at::Tensor& tensor) {
  try {
    (void)tensor.grad_fn();
    return false;
  } catch (const c10::Error&) {
    return true;
  }
}

std::string python_size(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << "torch.Size([";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "])";
  return out.str();
}

// megatron.core.utils.safely_set_viewless_tensor_data
void safely_set_viewless_tensor_data(const at::Tensor& tensor, const at::Tensor& new_data) {
  if (tensor.is_view()) {
    throw PythonError(
        "AssertionError",
        "Ensure tensor._base is None before setting tensor.data or storing tensor to memory "
        "buffer. Otherwise, a memory leak will occur (and likely accumulate over iterations). "
        "FYI, tensor._base has shape " + python_size(tensor._base().sizes()) +
            ", and new_data_tensor has shape " + python_size(new_data.sizes()) + ".");
  }
  tensor.set_data(new_data);
}

// tensor_parallel.utils.split_tensor_into_1d_equal_chunks(new_buffer=True) and
// gather_split_1d_tensor, for tensor-parallel world size 1 and rank 0.
constexpr int64_t kWorldSize = 1;
constexpr int64_t kRank = 0;

at::Tensor split_tensor_into_1d_equal_chunks(const at::Tensor& data) {
  const int64_t partition_size = data.numel() / kWorldSize;
  const int64_t start = partition_size * kRank;
  // Megatron allocates on the current CUDA device; the port uses the tensor's own device.
  at::Tensor chunk = at::empty({partition_size}, data.options().requires_grad(false));
  chunk.copy_(data.view({-1}).slice(0, start, start + partition_size));
  return chunk;
}

// "(2, 3)", "(6)", "()": a shape as gloo's errors print it.
std::string gloo_shape(at::IntArrayRef sizes) {
  std::string text = "(";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + ")";
}

at::Tensor gather_split_1d_tensor(const at::Tensor& data) {
  at::Tensor gathered = at::empty({data.numel() * kWorldSize}, data.options().requires_grad(false));
  // all_gather_into_tensor over one rank. Gloo (the CPU's group) wants each rank's part of the
  // output in the input's shape, so it refuses an input that is not 1-d, as a second backward
  // hands it (the first restored the input to its full shape); NCCL counts elements only.
  if (!data.is_cuda() && data.dim() != 1) {
    throw PythonError("RuntimeError", "ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected " +
                                          gloo_shape(data.sizes()) + ", got (" + std::to_string(data.numel()) + "))");
  }
  gathered.copy_(data.reshape({-1}));
  return gathered;
}

// torch.utils.checkpoint.detach_variable
Values detach_variable(const Values& inputs, CheckpointDecisions::DetachedRequiresGrad requires_grad_of) {
  using DetachedRequiresGrad = CheckpointDecisions::DetachedRequiresGrad;
  Values out;
  out.reserve(inputs.size());
  for (const Value& input : inputs) {
    if (!is_tensor(input)) {
      out.push_back(input);
      continue;
    }
    const at::Tensor& tensor = as_tensor(input);
    at::Tensor detached = tensor.detach();
    bool requires_grad = tensor.requires_grad();
    if (requires_grad_of == DetachedRequiresGrad::never) requires_grad = false;
    if (requires_grad_of == DetachedRequiresGrad::when_floating && detached.is_floating_point()) requires_grad = true;
    detached.set_requires_grad(requires_grad);
    out.emplace_back(detached);
  }
  return out;
}

// ArgsOrder::tensors_first: a port that keeps tensor and non-tensor arguments in
// two lists and joins them back as tensors first.
Values tensors_first(const Values& args) {
  Values out;
  for (const Value& arg : args) {
    if (is_tensor(arg)) out.push_back(arg);
  }
  for (const Value& arg : args) {
    if (!is_tensor(arg)) out.push_back(arg);
  }
  return out;
}

// Clearing::Whose::every_live_backward: the detached inputs of every backward call in progress, outermost
// first. Autograd runs a checkpoint's nested backward calls re-entrantly, on one thread at a time.
std::vector<const Values*>& live_detached_inputs() {
  static std::vector<const Values*> live;
  return live;
}

struct LiveDetachedInputs {
  explicit LiveDetachedInputs(const Values* inputs) { live_detached_inputs().push_back(inputs); }
  ~LiveDetachedInputs() { live_detached_inputs().pop_back(); }
  LiveDetachedInputs(const LiveDetachedInputs&) = delete;
  LiveDetachedInputs& operator=(const LiveDetachedInputs&) = delete;
};

// Autocast::recorded_on_the_function: the autocast state the last forward recorded, kept
// on the function (a class attribute in Python) instead of on each call's ctx.
compat::AutocastStates& last_recorded_autocast() {
  static compat::AutocastStates recorded = compat::default_autocast_states();
  return recorded;
}

// AfterCollecting::keeps_the_last_grads: "the last gradients, for debugging", kept until the next backward.
variable_list& last_collected_grads() {
  static variable_list grads;
  return grads;
}

void clear_grads(const Values& tensors, const CheckpointDecisions::Clearing& clearing) {
  using Clearing = CheckpointDecisions::Clearing;
  for (const Value& input : tensors) {
    if (!is_tensor(input)) continue;
    if (clearing.whose == Clearing::Whose::detached_requiring_grad && !as_tensor(input).requires_grad()) continue;
    at::Tensor& grad = as_tensor(input).mutable_grad();
    if (!grad.defined()) continue;
    switch (clearing.how) {
      case Clearing::How::reset: grad.reset(); break;
      case Clearing::How::zeroed_in_place: grad.zero_(); break;
      // The returned gradient is the same tensor, now empty.
      case Clearing::How::storage_freed: grad.set_data(at::empty({0}, grad.options())); break;
    }
  }
}

void set_rng_states(const rng::AllStates& states, CheckpointDecisions::RngSet which) {
  using RngSet = CheckpointDecisions::RngSet;
  switch (which) {
    case RngSet::all: rng::set_all_rng_states(states); break;
    case RngSet::cpu_only: rng::set_state(rng::cpu_generator(), states.cpu); break;
    case RngSet::device_only: rng::set_state(rng::device_generator(), states.device); break;
    case RngSet::all_in_reverse_order:
      rng::get_cuda_rng_tracker().set_states(states.tracker);
      rng::set_state(rng::device_generator(), states.device);
      rng::set_state(rng::cpu_generator(), states.cpu);
      break;
  }
}

const char* kNotCompatibleWithGrad =
    "Checkpointing is not compatible with .grad(), please use .backward() if possible";

// The fix's `finally: _unset_checkpointing()`, on the error path only (the normal path unsets
// the flag where Megatron does): unsets it when the scope is left by an exception.
struct FlagResetOnError {
  bool active;  // FlagOnError::unset
  int exceptions = std::uncaught_exceptions();
  ~FlagResetOnError() {
    if (active && std::uncaught_exceptions() > exceptions) set_checkpointing(false);
  }
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointCall> call,
                               at::TensorList tensor_args) {
    (void)tensor_args;  // the same tensors as call->args; passed so autograd sees them as inputs
    const CheckpointDecisions& decisions = call->decisions;
    const bool flag_found = is_checkpointing();
    const bool flag_after_body = decisions.flag_set == CheckpointDecisions::FlagSet::after_the_body;
    if (!flag_after_body) set_checkpointing(true);

    // Copy the rng states.
    call->rng_states = rng::get_all_rng_states();
    using Autocast = CheckpointDecisions::Autocast;
    if (decisions.autocast != Autocast::not_recorded) call->autocast = compat::autocast_states();
    if (decisions.autocast == Autocast::recorded_on_the_function) last_recorded_autocast() = call->autocast;
    switch (decisions.rng_saved) {
      case CheckpointDecisions::RngSaved::copies: break;
      case CheckpointDecisions::RngSaved::tracker_by_reference:
        call->rng_states.tracker = rng::get_cuda_rng_tracker().live_states_ptr();
        break;
      case CheckpointDecisions::RngSaved::deep_copies: {
        rng::AllStates& saved = call->rng_states;
        saved.cpu = saved.cpu.clone();
        saved.device = saved.device.clone();
        auto copies = std::make_shared<rng::StateMap>();
        for (const auto& [name, state] : *saved.tracker) (*copies)[name] = state.clone();
        saved.tracker = std::move(copies);
        break;
      }
    }

    const FlagResetOnError reset_on_error{decisions.flag_on_error == CheckpointDecisions::FlagOnError::unset};
    const bool tensors_first_order = decisions.args_order == CheckpointDecisions::ArgsOrder::tensors_first;
    Values outputs;
    {
      at::NoGradGuard no_grad;
      try {
        outputs = call->run_function(tensors_first_order ? tensors_first(call->args) : call->args);
      } catch (...) {
        if (decisions.rng_on_forward_error == CheckpointDecisions::RngOnForwardError::rewound) {
          rng::set_all_rng_states(call->rng_states);
        }
        if (flag_after_body) set_checkpointing(true);  // a finally clause, as Megatron leaves it set
        throw;
      }
    }
    if (flag_after_body) set_checkpointing(true);

    // Divide hidden states across the model parallel group and keep this rank's chunk.
    if (call->distribute_saved_activations) {
      if (call->args.empty()) throw PythonError("IndexError", "tuple index out of range");
      const Value& first = call->args[0];
      if (!is_tensor(first)) {
        throw PythonError("AttributeError", std::string("'") + python_type_name(first) +
                                                "' object has no attribute 'data'");
      }
      const at::Tensor& input_0 = as_tensor(first);
      call->input_0_shape = input_0.sizes().vec();
      // Python evaluates the new data before safely_set_viewless_tensor_data checks the view.
      at::Tensor chunk = split_tensor_into_1d_equal_chunks(input_0.detach());
      safely_set_viewless_tensor_data(input_0, chunk);
    }

    // Store everything. None is saved as an undefined tensor; other non-tensors are refused by
    // MegatronCheckpoint::apply, after this returns, as Python's apply does.
    //
    // libtorch's Function, saving, asks each tensor for its grad_fn (to tell outputs apart);
    // Python's compares the tensors with the outputs instead. So a view autograd's view+inplace
    // check refuses would raise here, in forward, and in Python it raises only when backward
    // unpacks ctx.saved_tensors. Such a view is kept beside the saved tensors, and backward asks
    // it again, which raises the same error at the same point. It lives as long as the node, as
    // in Python: a backward that cannot unpack never releases what it saved.
    variable_list to_save;
    for (size_t i = 0; i < call->args.size(); ++i) {
      const Value& arg = call->args[i];
      if (is_tensor(arg) && grad_fn_raises(as_tensor(arg))) {
        call->views_saved_aside.emplace_back(i, as_tensor(arg));
        to_save.emplace_back();
      } else {
        to_save.push_back(is_tensor(arg) ? as_tensor(arg) : at::Tensor());
      }
    }
    if (!call->views_saved_aside.empty()) {
      for (size_t i = 0; i < to_save.size(); ++i) {
        if (!to_save[i].defined()) continue;
        const c10::VariableVersion& counter = torch::autograd::impl::version_counter(to_save[i]);
        call->saved_versions.push_back({i, counter, counter.current_version()});
      }
    }
    ctx->save_for_backward(to_save);

    // One output for each of the function's, in its place: Python's Function numbers its
    // outputs so, non-tensors included ("Output 1 of CheckpointFunctionBackward is a view ..."
    // for (0.5, x)). A non-tensor's place holds an empty integer tensor: no memory, no gradient.
    variable_list numbered_outputs;
    for (const Value& output : outputs) {
      const bool output_is_tensor = is_tensor(output);
      call->output_is_tensor.push_back(output_is_tensor);
      if (output_is_tensor) {
        numbered_outputs.push_back(as_tensor(output));
        call->outputs_without_tensors.emplace_back(None{});
      } else {
        numbered_outputs.push_back(at::empty({0}, at::TensorOptions().dtype(at::kLong)));
        call->outputs_without_tensors.push_back(output);
      }
    }
    if (call->refuses_an_argument) {
      for (const Value& output : outputs) {
        if (!is_tensor(output)) continue;
        for (const Value& arg : call->args) {
          if (is_tensor(arg) && as_tensor(arg).unsafeGetTensorImpl() == as_tensor(output).unsafeGetTensorImpl()) {
            call->arguments_returned_as_is.push_back(as_tensor(output));
            break;
          }
        }
      }
    }
    // The saved variables hold the tensor arguments from here on; keep no second reference.
    for (Value& arg : call->args) {
      if (is_tensor(arg)) arg = None{};
    }
    ctx->saved_data["call"] = at::IValue::make_capsule(call);
    set_checkpointing(decisions.flag_on_return == CheckpointDecisions::FlagOnReturn::as_found && flag_found);
    return numbered_outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    using Decisions = CheckpointDecisions;
    auto call = c10::static_intrusive_pointer_cast<CheckpointCall>(ctx->saved_data["call"].toCapsule());
    const CheckpointDecisions& decisions = call->decisions;
    if (decisions.crash == Decisions::Crash::abort) std::abort();
    if (decisions.crash == Decisions::Crash::segfault) {
      int* volatile nowhere = nullptr;  // volatile: the compiler cannot see the pointer is null
      *nowhere = 1;
    }
    if (!torch::autograd::Engine::get_default_engine().is_checkpoint_valid()) {
      throw PythonError("RuntimeError", kNotCompatibleWithGrad);
    }
    const bool flag_found = is_checkpointing();
    const bool flag_after_body = decisions.flag_set == Decisions::FlagSet::after_the_body;
    if (!flag_after_body) set_checkpointing(true);
    const FlagResetOnError reset_on_error{decisions.flag_on_error == Decisions::FlagOnError::unset};
    // Unpacking in Python's order: a view kept aside raises autograd's view+inplace error when
    // asked for its grad_fn, unless a tensor saved before it fails its version check first.
    for (const auto& [position, view] : call->views_saved_aside) {
      if (call->saved_tensor_modified_before(position)) break;  // get_saved_variables raises it
      (void)view.grad_fn();
    }
    variable_list saved = ctx->get_saved_variables();
    // Not reached with a view kept aside (one of the two above raised); were it reached, the
    // view would take its place.
    for (const auto& [position, view] : call->views_saved_aside) saved.at(position) = view;
    if (call->distribute_saved_activations && decisions.distributed_input == Decisions::DistributedInput::gathered) {
      const at::Tensor& input_0 = saved[0];
      safely_set_viewless_tensor_data(input_0,
                                      gather_split_1d_tensor(input_0.detach()).view(call->input_0_shape));
    }
    Values inputs;
    for (const at::Tensor& tensor : saved) {
      if (tensor.defined()) inputs.emplace_back(tensor);
      else inputs.emplace_back(None{});
    }
    if (decisions.args_order == Decisions::ArgsOrder::tensors_first) inputs = tensors_first(inputs);

    Values detached_inputs;
    Values outputs;
    {
      // with _fork_rng(): the finally clause restores the states on both paths.
      const rng::AllStates current_states = rng::get_all_rng_states();
      try {
        // Set the states to what they were before the forward pass.
        if (decisions.recompute_from == Decisions::RecomputeFrom::forward_states) {
          set_rng_states(call->rng_states, decisions.rng_set);
        }
        detached_inputs = detach_variable(inputs, decisions.detached_requires_grad);
        at::AutoGradMode enable_grad(decisions.recompute_grad_mode == Decisions::RecomputeGradMode::enabled);
        // The fix: the recomputation under the autocast state forward ran in, put back after. A
        // region is entered only for a device type whose state differs from backward's: where
        // it is the same, the fix changes nothing (torch's checkpoint enters one always, which
        // also keeps autocast's cast cache alive until the recomputation ends).
        using Autocast = Decisions::Autocast;
        compat::AutocastStates recorded =
            decisions.autocast == Autocast::recorded_on_the_function ? last_recorded_autocast() : call->autocast;
        if (decisions.autocast == Autocast::recorded_without_dtype) {
          recorded.cpu.dtype = compat::default_autocast_states().cpu.dtype;
          recorded.cuda.dtype = compat::default_autocast_states().cuda.dtype;
        }
        const compat::AutocastStates current = compat::autocast_states();
        std::optional<compat::AutocastGuard> cpu_autocast;
        std::optional<compat::AutocastGuard> cuda_autocast;
        const bool recorded_any = decisions.autocast != Autocast::not_recorded;
        if (recorded_any && !(recorded.cpu == current.cpu)) cpu_autocast.emplace(at::kCPU, recorded.cpu);
        if (recorded_any && !(recorded.cuda == current.cuda)) cuda_autocast.emplace(at::kCUDA, recorded.cuda);
        // Where autocast's cache keeps casts made under no_grad (core/torch_version.h), the
        // recomputation runs without it: a nested checkpoint's forward would leave a cast of a
        // detached input that the body's next cast of it gets, with no gradient.
        std::optional<compat::AutocastCacheGuard> no_cast_cache;
        if ((cpu_autocast || cuda_autocast) && compat::kAutocastCacheKeepsCastsWithoutGrad) no_cast_cache.emplace(false);
        if (decisions.recompute_runs == Decisions::RecomputeRuns::twice) {
          (void)call->run_function(detach_variable(inputs, decisions.detached_requires_grad));
          if (decisions.recompute_from == Decisions::RecomputeFrom::forward_states) {
            set_rng_states(call->rng_states, decisions.rng_set);
          }
        }
        outputs = call->run_function(detached_inputs);
        if (flag_after_body) set_checkpointing(true);
      } catch (...) {
        if (flag_after_body) set_checkpointing(true);
        if (decisions.rng_restored == Decisions::RngRestored::always) set_rng_states(current_states, decisions.rng_set);
        throw;
      }
      if (decisions.rng_restored != Decisions::RngRestored::never) set_rng_states(current_states, decisions.rng_set);
    }

    // Python's backward receives one gradient per forward output, None for non-tensor outputs,
    // and zips them with the recomputed outputs (the shorter list wins).
    variable_list kept_outputs;
    variable_list kept_grads;
    variable_list all_grads;  // for GradsPaired::unfiltered
    for (size_t i = 0; i < outputs.size() && i < call->output_is_tensor.size(); ++i) {
      at::Tensor grad;
      if (call->output_is_tensor[i]) grad = grad_outputs.at(i);
      all_grads.push_back(grad);
      const Value& output = outputs[i];
      if (is_tensor(output) && as_tensor(output).requires_grad()) {
        kept_outputs.push_back(as_tensor(output));
        kept_grads.push_back(grad);
      }
    }
    if (decisions.grads_paired == Decisions::GradsPaired::unfiltered) {
      kept_grads.assign(all_grads.begin(), all_grads.begin() + static_cast<std::ptrdiff_t>(kept_outputs.size()));
    }
    // `outputs, args = zip(*[])` unpacks nothing: Megatron raises this when no output needs grad.
    if (kept_outputs.empty()) {
      throw PythonError("ValueError", "not enough values to unpack (expected 2, got 0)");
    }
    LiveDetachedInputs live(&detached_inputs);
    if (decisions.differentiated == Decisions::Differentiated::by_backward) {
      python_autograd_backward(kept_outputs, kept_grads);
    } else if (decisions.differentiated == Decisions::Differentiated::per_output) {
      for (size_t k = 0; k < kept_outputs.size(); ++k) {
        python_autograd_backward({kept_outputs[k]}, {k < kept_grads.size() ? kept_grads[k] : at::Tensor()},
                                 /*retain_graph=*/k + 1 < kept_outputs.size());
      }
    } else {
      // torch.autograd.grad(outputs, the detached inputs that require grad, grads, allow_unused=True),
      // each result put in its input's .grad for the collection below.
      variable_list wanted;
      for (const Value& input : detached_inputs) {
        if (is_tensor(input) && as_tensor(input).requires_grad()) wanted.push_back(as_tensor(input));
      }
      if (!wanted.empty()) {
        const variable_list got = torch::autograd::grad(kept_outputs, wanted, kept_grads, /*retain_graph=*/false,
                                                        /*create_graph=*/false, /*allow_unused=*/true);
        for (size_t k = 0; k < wanted.size(); ++k) {
          if (got[k].defined()) wanted[k].mutable_grad() = got[k];
        }
      }
    }

    // The change: clear the detached inputs' .grad once collected (CheckpointDecisions::Clearing).
    using Clearing = Decisions::Clearing;
    auto clear = [&](Clearing::When when) {
      if (!decisions.clearing || decisions.clearing->when != when) return;
      const Clearing& clearing = *decisions.clearing;
      if (clearing.whose == Clearing::Whose::callers_tensors) {
        clear_grads(inputs, clearing);
      } else if (clearing.whose == Clearing::Whose::every_live_backward) {
        for (const Values* live_inputs : live_detached_inputs()) clear_grads(*live_inputs, clearing);
      } else {
        clear_grads(detached_inputs, clearing);
      }
    };
    clear(Clearing::When::before_collecting);
    variable_list grads;
    grads.emplace_back();  // the CheckpointCall argument
    for (const Value& input : detached_inputs) {
      if (!is_tensor(input)) continue;
      const at::Tensor& tensor = as_tensor(input);
      at::Tensor grad;
      switch (decisions.collected) {
        case Decisions::Collected::the_grad: grad = tensor.grad(); break;
        case Decisions::Collected::the_grad_moved_out: grad = std::move(tensor.mutable_grad()); break;
        case Decisions::Collected::a_copy:
          grad = tensor.grad();
          if (grad.defined()) grad = grad.clone();
          break;
        case Decisions::Collected::zeros_where_undefined:
          grad = tensor.grad();
          if (!grad.defined() && tensor.requires_grad()) grad = at::zeros_like(tensor);
          break;
      }
      grads.push_back(std::move(grad));
    }
    clear(Clearing::When::after_collecting);
    if (decisions.after_collecting == Decisions::AfterCollecting::frees_the_detached_inputs) {
      // `inp.data = torch.empty(0)`: what a user's module kept of an input loses its values.
      for (const Value& input : detached_inputs) {
        if (is_tensor(input)) as_tensor(input).set_data(at::empty({0}, as_tensor(input).options()));
      }
    }
    if (decisions.after_collecting == Decisions::AfterCollecting::keeps_the_last_grads) last_collected_grads() = grads;
    if (decisions.flag_on_return != Decisions::FlagOnReturn::left_set_by_backward) {
      set_checkpointing(decisions.flag_on_return == Decisions::FlagOnReturn::as_found && flag_found);
    }
    return grads;
  }
};

}  // namespace

Values MegatronCheckpoint::apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) {
  auto call = c10::make_intrusive<CheckpointCall>();
  call->run_function = run_function;
  call->distribute_saved_activations = settings.distribute_saved_activations;
  call->decisions = variant_.decisions;
  call->args = args;

  std::vector<at::Tensor> tensor_args;
  bool any_requires_grad = false;
  for (const Value& arg : args) {
    if (!is_tensor(arg)) continue;
    tensor_args.push_back(as_tensor(arg));
    any_requires_grad = any_requires_grad || as_tensor(arg).requires_grad();
  }
  const bool is_executable = at::GradMode::is_enabled() && any_requires_grad;
  // Python's Function.apply saves for backward after forward returned, and only when the call
  // is differentiable: that is when save_for_backward refuses a non-tensor, non-None argument.
  // It refuses before it gives the outputs the checkpoint's node, so a tensor the body returned
  // (and stashed) never requires grad: forward then runs as a call that is not differentiable.
  std::optional<size_t> refused;
  for (size_t i = 0; is_executable && !refused && i < args.size(); ++i) {
    if (!is_tensor(args[i]) && !is_none(args[i])) refused = i;
  }
  call->refuses_an_argument = refused.has_value();
  variable_list numbered_outputs;
  {
    std::optional<at::NoGradGuard> not_differentiable;
    if (refused) not_differentiable.emplace();
    numbered_outputs = CheckpointFunction::apply(call, at::TensorList(tensor_args));
  }
  if (refused) {
    // Python's apply first makes a view of each argument returned as it is, asking it for its
    // grad_fn, where autograd's view+inplace check refuses a view whose base changed in place.
    for (const at::Tensor& returned : call->arguments_returned_as_is) (void)returned.grad_fn();
    throw PythonError("TypeError", "save_for_backward can only save variables, but argument " + std::to_string(*refused) +
                                       " is of type " + python_type_name(args[*refused]));
  }

  Values outputs = call->outputs_without_tensors;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (call->output_is_tensor[i]) outputs[i] = numbered_outputs.at(i);
  }
  return outputs;
}

}  // namespace recheck
