#include "core/interpreter.h"

#include <algorithm>
#include <exception>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>

#include "core/allocation_scopes.h"
#include "core/recomputation_inputs.h"
#include "core/memory.h"
#include "core/tensor_ops.h"
#include "core/torch_compat.h"
#include "core/training_loop.h"

namespace recheck {

namespace {

// The harness's own copies are not counted by the memory probe. A tensor whose storage no longer
// holds its elements (a discarded output, or a tensor sharing its storage) is recorded as no
// tensor: reading it would read freed memory.
at::Tensor clone_for_record(const at::Tensor& t) {
  if (!t.defined() || !data_allocated(t)) return at::Tensor();
  memory::Uncounted uncounted;
  return t.detach().to(at::kCPU).clone();
}

// Where each checkpoint op sits, and each stash op in the case's order of its ops.
struct Sites {
  std::map<const Checkpoint*, std::string> checkpoints;
  std::map<const Discard*, std::string> discards;
  std::map<const Hook*, std::string> hooks;
  std::map<int, ModuleRecord> modules;  // every module a state op names, at its initial state
  struct StashSite {
    const Stash* stash;
    std::string site;
    const Op* op;  // the Op holding it (its number in a trace)
  };
  std::vector<StashSite> stashes;
};

void collect_sites(const Segment& segment, const std::string& path, Sites& sites) {
  for (size_t i = 0; i < segment.ops.size(); ++i) {
    const Op& op = segment.ops[i];
    const std::string site = path + ".ops[" + std::to_string(i) + "]";
    if (const auto* stash = std::get_if<Stash>(&op)) sites.stashes.push_back({stash, site, &op});
    if (const auto* discard = std::get_if<Discard>(&op)) sites.discards[discard] = site;
    if (const auto* hook = std::get_if<Hook>(&op)) sites.hooks[hook] = site;
    if (const auto* state = std::get_if<ModuleState>(&op)) sites.modules[state->module].module = state->module;
    const Segment* body = op_body(op);
    if (!body) continue;
    if (const auto* checkpoint = std::get_if<Checkpoint>(&op)) sites.checkpoints[checkpoint] = site;
    collect_sites(*body, site + ".body", sites);
  }
}

// A non-tensor as its type and value: "int 3", "str 'a'", "None".
std::string describe_non_tensor(const Value& value) {
  struct Describe {
    std::string operator()(None) const { return "None"; }
    std::string operator()(const at::Tensor&) const { return "Tensor"; }
    std::string operator()(int64_t x) const { return "int " + std::to_string(x); }
    std::string operator()(double x) const { return "float " + std::to_string(x); }
    std::string operator()(bool x) const { return std::string("bool ") + (x ? "True" : "False"); }
    std::string operator()(const std::string& x) const { return "str '" + x + "'"; }
  };
  return std::visit(Describe{}, value);
}

class Interpreter {
 public:
  // `leaves`: the case's leaves, which a capture hands out wherever it sits.
  Interpreter(const Case& c, Values leaves, CheckpointImplementation& implementation, const RunOptions& options,
              Observations& observations)
      : leaves_(std::move(leaves)),
        implementation_(implementation),
        options_(options),
        obs_(observations),
        trace_index_(!options.record_op_trace || c.device != "cpu" ? nullptr
                     : options.trace_index                        ? options.trace_index
                                                                  : std::make_shared<const TraceIndex>(c)),
        trace_(trace_index_.get(), observations.trace) {
    collect_sites(c.root, "root", sites_);
    modules_ = sites_.modules;
  }

  ~Interpreter() { stash_.clear(); }

  // `flag_reads`: where a checkpoint's body reads the is-checkpointing flag, before each op.
  // `prints`: the fingerprints of its values the trace takes (a checkpoint's body call keeps them).
  Values run_segment(const Segment& segment, const Values& inputs, std::vector<bool>* flag_reads = nullptr,
                     ValuePrints* prints = nullptr) {
    ValuePrints own_prints;
    if (prints == nullptr) prints = &own_prints;
    Values values = inputs;
    values.reserve(segment_value_count(segment, static_cast<int>(inputs.size())));
    std::map<int, std::shared_ptr<KeptCheckpoint>> kept;  // checkpoints without output, by first output
    for (const Op& op : segment.ops) {
      if (flag_reads != nullptr) flag_reads->push_back(implementation_.checkpointing_flag());
      if (const auto* discard = std::get_if<Discard>(&op)) {
        discards_.discard(*discard, sites_.discards.at(discard), values, kept, implementation_);
        ++obs_.op_executions;
        continue;
      }
      // Which op raised (the innermost: the first guard an exception unwinds through says so).
      struct Raising {
        Interpreter& self;
        const Op& op;
        int exceptions = std::uncaught_exceptions();
        ~Raising() {
          if (std::uncaught_exceptions() > exceptions && !self.raised_by_) {
            self.raised_by_ = std::make_pair(self.trace_.number(op), self.recomputing_ > 0);
          }
        }
      } raising{*this, op};
      const size_t traced = trace_.op_began(op, *prints, values, iteration, recomputing_ > 0);
      drawn_ = 0;
      Values outputs = std::visit([&](const auto& o) { return run(o, values); }, op);
      ++obs_.op_executions;
      const size_t first_output = values.size();
      if (last_kept_) kept[static_cast<int>(first_output)] = std::move(last_kept_);
      last_kept_.reset();
      for (Value& output : outputs) values.push_back(std::move(output));
      trace_.op_returned(traced, *prints, values, first_output, drawn_);
    }
    Values outputs;
    for (int ref : segment.outputs) outputs.push_back(values.at(ref));
    return outputs;
  }

  int iteration = 0;
  RecomputationInputs recomputation_inputs;  // this iteration's

  // The op that raised this iteration's error, and whether in a recomputation (ErrorRecord).
  std::pair<int, bool> raised_by() const { return raised_by_.value_or(std::make_pair(-1, false)); }

  // The tensors the stash ops keep now, by site: where a live recomputation input may be held.
  std::vector<std::pair<std::string, at::Tensor>> stashed_tensors() const {
    std::vector<std::pair<std::string, at::Tensor>> stashes;
    for (const auto& [op, site, variant] : sites_.stashes) {
      const auto kept = stash_.find(op);
      if (kept != stash_.end() && is_tensor(kept->second)) stashes.emplace_back(site, as_tensor(kept->second));
    }
    return stashes;
  }

  // The iteration's discard records (IterationRecord::discards); lets go of what they held.
  std::vector<DiscardRecord> finish_discards() { return discards_.finish(); }
  // The calls of this iteration's hooks; the hooks stop recording and scaling.
  std::vector<HookCall> finish_hooks() {
    hooks_->active = false;
    hooks_->alive.clear();
    return std::move(hooks_->calls);
  }
  std::vector<std::string> alive_checkpoint_objects() const { return discards_.alive_objects(); }
  // The modules' state now (IterationRecord::modules).
  std::vector<ModuleRecord> modules() const {
    std::vector<ModuleRecord> records;
    for (const auto& [number, module] : modules_) records.push_back(module);
    return records;
  }

  void start_iteration(int i) {
    iteration = i;
    hooks_ = std::make_shared<HookLog>();
    raised_by_.reset();
    last_kept_.reset();
    recomputation_inputs.clear();
    scopes_->reset();
  }

  // What every stash op that ran keeps now (IterationRecord::stashed).
  std::vector<StashRecord> stashed() const {
    std::vector<StashRecord> records;
    for (const auto& [op, site, variant] : sites_.stashes) {
      const auto kept = stash_.find(op);
      if (kept == stash_.end()) continue;
      StashRecord record;
      record.site = site;
      record.op = trace_.number(*variant);
      record.tensor = is_tensor(kept->second);
      if (!record.tensor) {
        record.value = describe_non_tensor(kept->second);
      } else if (const at::Tensor& t = as_tensor(kept->second); t.defined()) {
        record.requires_grad = t.requires_grad();
        record.is_leaf = t.is_leaf();
        record.version = static_cast<int64_t>(t._version());
        record.data = clone_for_record(t);
        if (t.is_leaf()) record.grad = clone_for_record(t.grad());  // a non-leaf's .grad is never populated
      }
      records.push_back(std::move(record));
    }
    return records;
  }

  // The allocation scopes: while measuring, every checkpoint call's forward and backward is one.
  void track_allocation_scopes() { scopes_->active = true; }
  void name_allocations(const std::vector<memory::Allocation>& allocations, AllocationRecord& record) const {
    record.measured = true;
    for (const memory::Allocation& allocation : allocations) {
      const size_t scope = static_cast<size_t>(allocation.scope);
      record.by_scope[scope < scopes_->names.size() ? scopes_->names[scope] : "unknown scope"].push_back(allocation.bytes);
    }
    for (auto& [scope, sizes] : record.by_scope) std::sort(sizes.begin(), sizes.end());
  }

 private:
  void scope_backward_of(const std::string& site, const Values& outputs) {
    if (!scopes_->active) return;
    std::unordered_set<torch::autograd::Node*> hooked;
    for (const Value& output : outputs) {
      if (!is_tensor(output)) continue;
      // The node the tensor holds, read without the view check grad_fn() makes.
      const torch::autograd::AutogradMeta* meta = torch::autograd::impl::get_autograd_meta(as_tensor(output));
      if (meta == nullptr || !meta->grad_fn_ || !hooked.insert(meta->grad_fn_.get()).second) continue;
      meta->grad_fn_->add_pre_hook(std::make_unique<EnterBackward>(scopes_, site));
      meta->grad_fn_->add_post_hook(std::make_unique<LeaveBackward>(scopes_));
    }
  }

  // The tensor ops (core/tensor_ops.h); a new op without a rule there or here does not build.
  template <typename TensorOp>
  Values run(const TensorOp& op, const Values& v) {
    return tensor_ops::run(op, v);
  }

  // What it drew is kept for the trace (OpExecution::drawn), where one is recorded.
  Values run(const Random& op, const Values& v) { return tensor_ops::run(op, v, trace_index_ ? &drawn_ : nullptr); }

  Values run(const Stash& op, const Values& v) {
    stash_[&op] = v.at(op.x);
    return {};
  }

  Values run(const Raise& op, const Values& v) {
    const at::Tensor& x = tensor_ops::expect_tensor(v.at(op.x), "raise");
    if (op.when == Raise::When::recompute && recomputing_ == 0) return {x};
    if (op.when == Raise::When::first_iteration && iteration != 0) return {x};
    at::mm(x.reshape({1, -1}), at::zeros({x.numel() + 1, 1}, x.options()));
    // Reached only when the product did not run: a selective checkpoint's recomputation answers
    // a product it saved from its cache (PyTorch's create_selective_checkpoint_contexts), as the
    // exported script's raise_op does.
    return {x};
  }

  // The body under the region's autocast state; what it saved for backward is differentiated
  // outside, as in training loops (a checkpoint's recomputation included).
  Values run(const Autocast& op, const Values& v) {
    Values args;
    for (int ref : op.args) args.push_back(v.at(ref));
    const compat::AutocastGuard autocast(
        op.device_type == "cuda" ? at::kCUDA : at::kCPU,
        {op.enabled, op.dtype == Autocast::Precision::float16 ? at::kHalf : at::kBFloat16});
    return run_segment(*op.body, args);
  }

  Values run(const Discard&, const Values&) { throw std::logic_error("a discard runs in run_segment"); }

  // Hangs the hook where the tensor requires grad (Hook): x itself, with a hook on it.
  Values run(const Hook& op, const Values& v) {
    const at::Tensor& x = tensor_ops::expect_tensor(v.at(op.x), "hook");
    if (!x.requires_grad()) return {x};
    if (op.kind != Hook::Kind::tensor) {
      if (!x.is_leaf()) return {x};
      // The node lives while the iteration's log holds it (finish_hooks lets go), as DDP keeps
      // the accumulators it hooks: one the graph does not reach would otherwise die with its hook.
      std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(x);
      const bool post_accumulate = op.kind == Hook::Kind::post_accumulate;
      auto hook = std::make_unique<AccumulatedHook>(hooks_, sites_.hooks.at(&op), recomputing_ > 0, x, post_accumulate);
      if (post_accumulate) {
        // PyTorch calls a tensor's post-accumulate-grad hooks inside its accumulator, before the
        // node's post hooks; libtorch 1.13 has none, so the hook goes before the node's others
        // but after the post-accumulate ones hung before it, in the order they were hung.
        auto& hooks = accumulator->post_hooks();
        auto at = std::find_if(hooks.begin(), hooks.end(), [](const auto& h) {
          const auto* mine = dynamic_cast<const AccumulatedHook*>(h.get());
          return mine == nullptr || !mine->post_accumulate();
        });
        hooks.insert(at, std::move(hook));
      } else {
        accumulator->add_post_hook(std::move(hook));
      }
      hooks_->alive.push_back(std::move(accumulator));
      return {x};
    }
    // Python's register_hook reads grad_fn first, which regenerates a view's node after its base
    // changed in place; libtorch 1.13's C++ register_hook reads the stale one and crashes (a
    // view changed in place under no_grad, as a reentrant checkpoint's forward does).
    (void)x.grad_fn();
    auto record = [log = hooks_, site = sites_.hooks.at(&op), recomputation = recomputing_ > 0](const at::Tensor& grad) {
      if (!log->active) return false;
      log->calls.push_back({site, recomputation, clone_for_record(grad)});
      return true;
    };
    if (op.scale == 1.0) {
      x.register_hook([record](const at::Tensor& grad) { record(grad); });
    } else {
      // An undefined gradient (an output whose gradient is None) is handed on as it is.
      x.register_hook([record, scale = op.scale](const at::Tensor& grad) {
        return record(grad) && grad.defined() ? grad * scale : at::Tensor();
      });
    }
    return {x};
  }

  // A module's state read and written (ModuleState), as often as the op runs: a recomputation
  // runs it again, as it runs a layer's forward again.
  Values run(const ModuleState& op, const Values& v) {
    const at::Tensor& x = tensor_ops::expect_tensor(v.at(op.x), "state");
    ModuleRecord& module = modules_.at(op.module);
    ++module.updates;
    if (op.fn == ModuleState::Fn::running_mean) {
      double mean = 0;
      if (x.numel() > 0) {
        memory::Uncounted uncounted;  // recheck's float64 copy, not the layer's memory
        const at::NoGradGuard no_grad;
        mean = x.detach().to(at::kDouble).mean().item<double>();
      }
      module.running_mean = (1 - kRunningMeanMomentum) * module.running_mean + kRunningMeanMomentum * mean;
      return {x};
    }
    module.steps += 1;
    return {x * (1.0 + static_cast<double>(module.steps % 4) / 4.0)};
  }

  // The leaf itself: a parameter the body captures, not an argument any checkpoint detaches.
  Values run(const Capture& op, const Values&) { return {leaves_.at(static_cast<size_t>(op.leaf))}; }

  Values run(const Fork& op, const Values& v) {
    Values args;
    for (int ref : op.args) args.push_back(v.at(ref));
    Values outputs;
    rng::tracker_fork(op.tracker_state, [&] { outputs = run_segment(*op.body, args); });
    return outputs;
  }

  Values run(const Checkpoint& op, const Values& v) {
    Values args;
    for (const Arg& arg : op.args) {
      struct ToValue {
        const Values& v;
        Value operator()(const Ref& r) const { return v.at(r.value); }
        Value operator()(None) const { return None{}; }
        Value operator()(int64_t x) const { return x; }
        Value operator()(double x) const { return x; }
        Value operator()(bool x) const { return x; }
        Value operator()(const std::string& x) const { return x; }
      };
      args.push_back(std::visit(ToValue{v}, arg));
    }
    std::optional<size_t> record;
    if (options_.record_segment_calls) {
      record = obs_.segment_calls.size();
      obs_.segment_calls.push_back({sites_.checkpoints.at(&op), iteration, {}, {}, {}});
    }
    const Segment* body = &*op.body;
    auto calls = std::make_shared<int>(0);
    auto returned = std::make_shared<bool>(false);
    auto callers = std::make_shared<RecomputationInputs::CallerTensors>(RecomputationInputs::caller_tensors(args));
    RunFunction run_function = [this, &op, body, record, calls, returned, callers](const Values& inputs) {
      // Every call after the first is a recomputation, and so is all that runs inside it.
      const bool recomputation = (*calls)++ > 0;
      if (recomputation) {
        recomputation_inputs.watch(sites_.checkpoints.at(&op), inputs, returned, *callers);
        if (memory::timeline_recording()) memory::mark_timeline("recompute " + sites_.checkpoints.at(&op));
      }
      struct Count {  // counts this call while it runs, also when it throws
        int& in_progress;
        bool counted;
        ~Count() { in_progress -= counted; }
      } count{recomputing_ += recomputation, recomputation};
      if (record) obs_.segment_calls[*record].autocast.push_back(compat::autocast_states());
      // The flag as the body sees it, before each of its ops and once they returned: this
      // call's readings, kept also when it raises.
      struct ReadFlag {
        Observations& obs;
        std::optional<size_t> record;
        std::vector<bool> reads;
        ~ReadFlag() {
          if (record) obs.segment_calls[*record].flag_reads.push_back(std::move(reads));
        }
      } read_flag{obs_, obs_.keeps_checkpointing_flag ? record : std::nullopt, {}};
      ValuePrints prints;
      const size_t traced = trace_.body_began(op, prints, inputs, iteration, recomputing_ > 0);
      Values outputs = run_segment(*body, inputs, read_flag.record ? &read_flag.reads : nullptr, &prints);
      trace_.body_returned(traced, prints, inputs, outputs, body->outputs);
      if (read_flag.record) read_flag.reads.push_back(implementation_.checkpointing_flag());
      if (record) {
        std::vector<at::Tensor> recorded;
        for (const Value& output : outputs) recorded.push_back(is_tensor(output) ? clone_for_record(as_tensor(output)) : at::Tensor());
        obs_.segment_calls[*record].calls.push_back(std::move(recorded));
      }
      return outputs;
    };
    Values outputs;
    {
      const std::string& site = sites_.checkpoints.at(&op);
      scopes_->enter(site, "forward");
      struct Leave {
        AllocationScopes& scopes;
        ~Leave() { scopes.leave(); }
      } leave{*scopes_};
      if (op.without_output) {
        auto [returned_outputs, handle] = implementation_.apply_without_output(run_function, CallSettings{op.distribute, op.options}, args);
        outputs = std::move(returned_outputs);
        if (handle) discards_.watch(site, iteration, *handle);
        last_kept_ = Discards::keep(site, std::move(handle), calls, outputs);
      } else {
        outputs = implementation_.apply(run_function, CallSettings{op.distribute, op.options}, args);
      }
    }
    scope_backward_of(sites_.checkpoints.at(&op), outputs);
    RecomputationInputs::mark_when_backward_returns(outputs, returned);
    if (outputs.size() != op.body->outputs.size()) {
      throw PythonError("RuntimeError", implementation_.name() + " returned " + std::to_string(outputs.size()) +
                                            " outputs for a body with " +
                                            std::to_string(op.body->outputs.size()));
    }
    return outputs;
  }

  const Values leaves_;
  CheckpointImplementation& implementation_;
  const RunOptions& options_;
  Observations& obs_;
  Sites sites_;
  std::map<const Stash*, Value> stash_;
  std::map<int, ModuleRecord> modules_;  // carried from one iteration to the next
  Discards discards_;
  // What this iteration's hooks record; a hook of an earlier iteration holds that one's, off.
  struct HookLog {
    bool active = true;
    std::vector<HookCall> calls;
    std::vector<std::shared_ptr<torch::autograd::Node>> alive;  // the accumulators hooked
  };
  // An accumulator or post-accumulate-grad hook: records the parameter's .grad each time its
  // accumulator ran.
  class AccumulatedHook final : public torch::autograd::FunctionPostHook {
   public:
    AccumulatedHook(std::shared_ptr<HookLog> log, std::string site, bool recomputation, at::Tensor parameter,
                    bool post_accumulate)
        : log_(std::move(log)),
          site_(std::move(site)),
          recomputation_(recomputation),
          post_accumulate_(post_accumulate),
          parameter_(std::move(parameter)) {}
    bool post_accumulate() const { return post_accumulate_; }
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& /*inputs*/) override {
      if (log_->active) log_->calls.push_back({site_, recomputation_, clone_for_record(parameter_.grad())});
      return outputs;
    }

   private:
    std::shared_ptr<HookLog> log_;
    std::string site_;
    bool recomputation_;
    bool post_accumulate_;
    at::Tensor parameter_;  // the leaf its accumulator holds anyway
  };
  std::shared_ptr<HookLog> hooks_ = std::make_shared<HookLog>();
  std::shared_ptr<KeptCheckpoint> last_kept_;  // the checkpoint without output that just returned
  int recomputing_ = 0;  // recomputations in progress
  std::shared_ptr<const TraceIndex> trace_index_;
  uint64_t drawn_ = 0;  // the print of what the last random op drew, while a trace is recorded
  TraceRecorder trace_;
  std::optional<std::pair<int, bool>> raised_by_;
  std::shared_ptr<AllocationScopes> scopes_ = std::make_shared<AllocationScopes>();
};

// The harness's record of the RNG states: its allocations are not the run's.
rng::Snapshot harness_snapshot() {
  memory::Uncounted uncounted;
  return rng::snapshot();
}

}  // namespace

void set_value_element_limit(int64_t elements) { tensor_ops::set_element_limit(elements); }

void use_deterministic_algorithms() {
  // The environment once per process (run_case calls this for every run; setenv is not free
  // and races with readers of the environment), the flag every time.
  static std::once_flag environment;
  std::call_once(environment, [] { setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0); });
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

std::string AliveInput::describe() const {
  return where + " (" + std::to_string(storage_bytes) + " bytes, .grad " + std::to_string(grad_bytes) +
         " bytes), held by " + held_by;
}

Observations run_case(const Case& c, CheckpointImplementation& implementation, const RunOptions& options) {
  use_deterministic_algorithms();
  Observations obs;
  obs.implementation = implementation.name();
  obs.code = implementation.code();
  obs.keeps_checkpointing_flag = implementation.keeps_checkpointing_flag();
  obs.device = c.device;
  const bool on_cuda = c.device == "cuda";
  rng::use_device(on_cuda ? rng::Device::cuda : rng::Device::cpu);
  const rng::UseTracker tracker(implementation.tracker());
  // Before seeding: the states a run starts from are then the run's own blocks, and a run that
  // frees them is credited (core/memory.h).
  memory::begin_run(/*measured=*/options.measure_memory || options.cpu_memory_budget > 0);
  rng::reset_all(c.seed);
  obs.tracker_seeded = harness_snapshot().tracker;
  implementation.reset_checkpointing_flag();
  compat::set_autocast_states(compat::default_autocast_states());  // what a leak of an earlier run left

  std::optional<memory::CpuProbe> probe;
  std::optional<memory::CudaProbe> cuda_probe;  // else the caching allocator's statistics
  const bool measure = options.measure_memory;
  if ((measure || options.cpu_memory_budget > 0) && !on_cuda) probe.emplace();
  if (measure && on_cuda && memory::cuda_probe_available()) cuda_probe.emplace();
  if (probe && options.cpu_memory_budget > 0) probe->set_budget(options.cpu_memory_budget);
  auto held = [&] {
    if (!on_cuda) return probe->current();
    return cuda_probe ? cuda_probe->current() : memory::cuda_current();
  };
  auto peak = [&] {
    if (!on_cuda) return probe->peak();
    return cuda_probe ? cuda_probe->peak() : memory::cuda_peak();
  };
  auto reset_peak = [&] {
    if (!on_cuda) probe->reset_peak();
    else if (cuda_probe) cuda_probe->reset_peak();
    else memory::cuda_reset_peak();
  };

  std::vector<at::Tensor> leaves;
  try {
    leaves = make_leaves(c);
  } catch (...) {
    obs.error = ErrorRecord{0, "setup", describe_current_exception(), harness_snapshot(), harness_snapshot()};
    return obs;
  }
  Values leaf_values(leaves.begin(), leaves.end());
  Interpreter interpreter(c, leaf_values, implementation, options, obs);
  std::optional<memory::AllocationLog> allocations;
  if (measure && memory::allocation_log_available(on_cuda)) {
    allocations.emplace(on_cuda);
    interpreter.track_allocation_scopes();
  }

  // The state an iteration left, recorded by this one function whether it completed or raised
  // (then `record.error` is set, and the outputs and the graph are gone: they lived in the block
  // the exception left). After an error only the recomputation inputs of calls whose backward
  // returned count, and memory is not measured.
  std::vector<at::Tensor> returned(leaves.size());  // what torch.autograd.grad gave this iteration
  auto record_state_after = [&](IterationRecord& record) {
    const bool completed = !record.error;
    record.discards = interpreter.finish_discards();  // before the floor: the records' tensors are the harness's
    record.hook_calls = interpreter.finish_hooks();
    record.modules = interpreter.modules();
    if (completed && allocations) {
      const std::vector<memory::Allocation> made = allocations->take();
      if (!allocations->overflowed()) interpreter.name_allocations(made, record.allocations);
    }
    const bool measured = completed && measure;
    if (measured) {
      implementation.settle();
      record.memory.measured = true;
      record.memory.floor = held();
      record.memory.peak = peak();
    }
    record.detached_inputs_holding_grad = interpreter.recomputation_inputs.holding_grad(/*returned_only=*/!completed);
    if (completed) record.gradients_held_elsewhere = interpreter.recomputation_inputs.gradients_held_elsewhere(leaves);
    record.stashed = interpreter.stashed();
    if (completed) {
      memory::Uncounted uncounted;  // the harness's record, after the floor was read
      record.alive_inputs = interpreter.recomputation_inputs.alive(interpreter.stashed_tensors());
      record.alive_checkpoints = interpreter.alive_checkpoint_objects();
    }
    // Then the recomputation inputs let go of their .grad, as clearing has them do in backward:
    // what that frees is what clearing saves, and every run starts the next iteration without it.
    const int64_t released = interpreter.recomputation_inputs.release_grads();
    if (measured) {
      record.memory.released_grads = released;
      record.memory.released_bytes = record.memory.floor - held();
    }
    // The leaves' gradients as the loop holds them: what torch.autograd.grad returned, else .grad.
    for (size_t k = 0; k < leaves.size(); ++k) {
      record.leaf_grads.push_back(clone_for_record(returned[k].defined() ? returned[k] : leaves[k].grad()));
      record.leaf_data.push_back(clone_for_record(leaves[k]));
    }
    record.rng = completed ? harness_snapshot() : record.error->rng;
    record.checkpointing_flag = implementation.checkpointing_flag();
    record.autocast = compat::autocast_states();
  };

  for (int iteration = 0; iteration < c.iterations; ++iteration) {
    interpreter.start_iteration(iteration);
    returned.assign(leaves.size(), at::Tensor());
    IterationRecord record;
    const char* phase = "forward";
    rng::Snapshot phase_start = harness_snapshot();
    const int64_t ops_before = obs.op_executions;
    const bool timeline = measure && !on_cuda && options.record_timeline && iteration + 1 == c.iterations;
    if (measure) reset_peak();
    if (timeline) {
      probe->start_timeline();
      memory::mark_timeline("forward");
    }
    if (allocations) (void)allocations->take();  // what came before the iteration is no call's
    try {
      Values outputs = interpreter.run_segment(c.root, leaf_values);
      at::Tensor loss;
      for (size_t i = 0; i < outputs.size(); ++i) {
        const Value& output = outputs[i];
        record.outputs.push_back(is_tensor(output) ? clone_for_record(as_tensor(output)) : at::Tensor());
        if (!is_tensor(output) || !as_tensor(output).requires_grad()) continue;
        const at::Tensor& tensor = as_tensor(output);
        at::Tensor term = (tensor * loss_weight(c, i, tensor)).sum();
        loss = loss.defined() ? loss + term : term;
      }
      record.loss = clone_for_record(loss);
      phase = "backward";
      phase_start = harness_snapshot();
      memory::mark_timeline("backward");
      if (loss.defined()) differentiate(c.backward, loss, leaves, returned);
    } catch (...) {
      if (timeline) obs.timeline = probe->stop_timeline();
      record.error = ErrorRecord{iteration, phase, describe_current_exception(), harness_snapshot(), std::move(phase_start),
                                 obs.op_executions - ops_before};
      std::tie(record.error->raised_by_op, record.error->raised_in_recomputation) = interpreter.raised_by();
      if (!obs.error) obs.error = record.error;
      record.outputs.clear();
      record.loss = at::Tensor();
      record_state_after(record);
      obs.iterations.push_back(std::move(record));
      // A training loop that skips the batch goes on with the next; by default the run stops.
      if (c.continue_after_error) continue;
      break;
    }
    // The outputs and the loss are gone: what is held now is the floor.
    if (timeline) obs.timeline = probe->stop_timeline();
    record_state_after(record);
    obs.iterations.push_back(std::move(record));
  }
  return obs;
}

}  // namespace recheck
