// The named variants of the port (checkpoint.h): the change, the oracle, the mutants, the
// equivalent rewrites, the fixes of the released function and the crashing test variants.
#include "suts/megatron_checkpoint_function/checkpoint.h"

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/torch_version.h"

namespace recheck {

namespace {

using D = CheckpointDecisions;
// One decision taken another way: a function that sets it on the decisions it is given.
using Decision = void (*)(D&);

// The change under review: Megatron's function that clears the detached inputs' .grad once
// backward collected them.
D the_change() {
  D decisions;
  decisions.clearing = D::Clearing{};
  return decisions;
}

D change_with(std::initializer_list<Decision> taken) {
  D decisions = the_change();
  for (Decision decision : taken) decision(decisions);
  return decisions;
}

// The fixes of the released function, as decisions, for the fixes and the mistakes made in them.
void autocast_recorded(D& d) { d.autocast = D::Autocast::recorded_per_call; }
void flag_reset_on_error(D& d) { d.flag_on_error = D::FlagOnError::unset; }
// Putting the flag back as it was found needs the error path too: an error leaves Megatron's
// flag set, and a later forward would otherwise put that leftover back instead of unsetting it.
void flag_as_found(D& d) {
  d.flag_on_return = D::FlagOnReturn::as_found;
  d.flag_on_error = D::FlagOnError::unset;
}

Variant mutant(const char* name, const char* description, Decision mistake, const char* made_from = "clearing",
               Decision fixed = nullptr) {
  D decisions = fixed ? change_with({fixed, mistake}) : change_with({mistake});
  return Variant({name, std::string("mutant: ") + description, VariantKind::mutant, made_from}, decisions);
}
Variant equivalent(const char* name, const char* description, Decision rewrite) {
  return Variant({name, std::string("equivalent: ") + description, VariantKind::equivalent}, change_with({rewrite}));
}
// The change plus a fix of something the released function gets wrong: where the oracle fails a
// property the fix is about, the verdict is `fixed`.
Variant fix(const char* name, const char* description, Decision fixed) {
  return Variant({name, std::string("fix: ") + description, VariantKind::fix}, change_with({fixed}));
}

}  // namespace

const std::vector<Variant>& variants() {
  // Only a case with an autocast dtype other than the device type's default tells it from the
  // oracle: float16 on CPU (libtorch 2.1 and later) or bfloat16 on CUDA.
  static const Variant dtype_lost = [] {
    Variant variant = mutant("autocast-dtype-lost",
                             "autocast-restored, but it restores whether autocast was on, not its dtype (the device's "
                             "default: CPU bfloat16, CUDA float16)",
                             [](D& d) { d.autocast = D::Autocast::recorded_without_dtype; }, "autocast-restored",
                             autocast_recorded);
    if (!compat::kCpuAutocastHasFloat16) {
      variant.cannot_be_killed_on_cpu = std::string("only a float16 autocast case tells it from the oracle on CPU, and CPU "
                                                    "autocast casts to float16 from libtorch 2.1 (this build: ") +
                                        TORCH_VERSION + ")";
    }
    return variant;
  }();
  using Clearing = D::Clearing;
  static const std::vector<Variant> all = {
      {{"clearing", "the change under test: resets .grad of detached inputs after collecting it", VariantKind::change},
       the_change()},
      {{"nonclearing", "Megatron before the change: the oracle", VariantKind::oracle}, D{}},
      mutant("clear-before-collect", "resets .grad before collecting it",
             [](D& d) { d.clearing->when = Clearing::When::before_collecting; }),
      mutant("zero-grad-in-place", "zeroes .grad in place instead of resetting it",
             [](D& d) { d.clearing->how = Clearing::How::zeroed_in_place; }),
      mutant("skip-rng-restore", "does not restore the RNG states after recomputing",
             [](D& d) { d.rng_restored = D::RngRestored::never; }),
      mutant("skip-forward-rng", "recomputes without setting the forward RNG states",
             [](D& d) { d.recompute_from = D::RecomputeFrom::current_states; }),
      mutant("cpu-rng-only", "saves and restores the CPU RNG state only", [](D& d) { d.rng_set = D::RngSet::cpu_only; }),
      mutant("device-rng-only", "saves and restores the device RNG state only",
             [](D& d) { d.rng_set = D::RngSet::device_only; }),
      mutant("tracker-by-reference", "saves the tracker's live states instead of a copy",
             [](D& d) { d.rng_saved = D::RngSaved::tracker_by_reference; }),
      mutant("recompute-no-grad", "recomputes with grad mode off",
             [](D& d) { d.recompute_grad_mode = D::RecomputeGradMode::disabled; }),
      mutant("flag-left-set", "leaves the is-checkpointing flag set after backward",
             [](D& d) { d.flag_on_return = D::FlagOnReturn::left_set_by_backward; }),
      mutant("free-grad-storage", "frees the collected gradient's storage (x.grad.data = torch.empty(0))",
             [](D& d) { d.clearing->how = Clearing::How::storage_freed; }),
      mutant("clear-caller-grads", "resets .grad of the caller's tensors instead of the detached inputs",
             [](D& d) { d.clearing->whose = Clearing::Whose::callers_tensors; }),
      mutant("clear-all-live", "resets .grad of the detached inputs of every backward in progress (breaks nesting)",
             [](D& d) { d.clearing->whose = Clearing::Whose::every_live_backward; }),
      mutant("restore-not-exception-safe", "restores the RNG states only when recomputation succeeded",
             [](D& d) { d.rng_restored = D::RngRestored::on_success_only; }),
      mutant("detach-drops-requires-grad", "detaches inputs without keeping requires_grad",
             [](D& d) { d.detached_requires_grad = D::DetachedRequiresGrad::never; }),
      mutant("detach-forces-requires-grad", "makes every floating detached input require grad",
             [](D& d) { d.detached_requires_grad = D::DetachedRequiresGrad::when_floating; }),
      mutant("args-out-of-order", "re-merges tensor and non-tensor arguments as tensors first",
             [](D& d) { d.args_order = D::ArgsOrder::tensors_first; }),
      mutant("distributed-not-restored", "recomputes from the distributed chunk without gathering args[0]",
             [](D& d) { d.distributed_input = D::DistributedInput::left_split; }),
      mutant("grads-paired-unfiltered", "keeps the outputs that require grad but pairs them with the unfiltered grads",
             [](D& d) { d.grads_paired = D::GradsPaired::unfiltered; }),
      mutant("grads-of-inputs-only",
             "differentiates the recomputation with torch.autograd.grad of the detached inputs, not backward: "
             "parameters the body captured get no gradient",
             [](D& d) { d.differentiated = D::Differentiated::inputs_only; }),
      mutant("backward-per-output",
             "differentiates the recomputation with one backward per output: a hook on a value that feeds several "
             "outputs is called once for each",
             [](D& d) { d.differentiated = D::Differentiated::per_output; }),
      mutant("recompute-twice",
             "runs the body twice in backward, from forward's RNG states both times, the first run's outputs dropped: "
             "a module's running statistics and step counters move once more",
             [](D& d) { d.recompute_runs = D::RecomputeRuns::twice; }),
      mutant("keeps-last-grads", "keeps the last collected gradients alive, as a debugging aid",
             [](D& d) { d.after_collecting = D::AfterCollecting::keeps_the_last_grads; }),
      mutant("returns-grad-copies", "returns a copy of each collected gradient instead of the gradient itself",
             [](D& d) { d.collected = D::Collected::a_copy; }),
      mutant("materializes-zero-grads", "hands back a zero tensor where the collected gradient is undefined",
             [](D& d) { d.collected = D::Collected::zeros_where_undefined; }),
      mutant("rng-states-deep-copied", "saves deep copies of the RNG states (a second copy of each)",
             [](D& d) { d.rng_saved = D::RngSaved::deep_copies; }),
      mutant("flag-set-after-body", "sets the is-checkpointing flag once the body has run or raised, in forward and in backward",
             [](D& d) { d.flag_set = D::FlagSet::after_the_body; }),
      mutant("detached-inputs-freed", "frees each detached input's data after collecting its gradient "
             "(inp.data = torch.empty(0))", [](D& d) { d.after_collecting = D::AfterCollecting::frees_the_detached_inputs; }),
      mutant("rng-rewound-on-error", "puts the RNG states back as forward found them when its body raises",
             [](D& d) { d.rng_on_forward_error = D::RngOnForwardError::rewound; }),
      mutant("autocast-on-the-function",
             "autocast-restored, but the state is kept on the function, not per call: every recomputation runs "
             "under the state the last forward recorded",
             [](D& d) { d.autocast = D::Autocast::recorded_on_the_function; }, "autocast-restored", autocast_recorded),
      dtype_lost,
      equivalent("restore-order-reversed", "sets the tracker, device and CPU states in the reverse order",
                 [](D& d) { d.rng_set = D::RngSet::all_in_reverse_order; }),
      equivalent("clear-requiring-grad-only", "resets .grad only on the detached inputs that require grad",
                 [](D& d) { d.clearing->whose = Clearing::Whose::detached_requiring_grad; }),
      equivalent("grads-moved-out", "moves each gradient out of .grad as it collects, instead of copying the handle",
                 [](D& d) { d.collected = D::Collected::the_grad_moved_out; }),
      fix("flag-reset-on-error", "unsets the is-checkpointing flag when forward or backward raises (try/finally)",
          flag_reset_on_error),
      fix("flag-restored-after-nesting",
          "puts the is-checkpointing flag back as forward and backward found it (unset when they raise), so a body's ops "
          "after a nested checkpoint still read it set",
          flag_as_found),
      fix("autocast-restored",
          "records the autocast state (CPU and CUDA) in forward and recomputes under it, as torch.utils.checkpoint does",
          autocast_recorded),
      {{"aborts", "test variant: aborts inside backward, to show that recheck run isolates a crashing case",
        VariantKind::crash},
       change_with({[](D& d) { d.crash = D::Crash::abort; }})},
      {{"segfaults", "test variant: writes through a null pointer inside backward (a segmentation fault)",
        VariantKind::crash},
       change_with({[](D& d) { d.crash = D::Crash::segfault; }})},
      // The oracle under another name: only the change's own claims, grad-released and
      // memory-floor, can tell it from clearing.
      {{"no-clear", "mutant: the change left out", VariantKind::mutant, "clearing"}, D{}},
  };
  return all;
}

std::vector<std::string> variant_names(VariantKind kind) {
  std::vector<std::string> names;
  for (const Variant& variant : variants()) {
    if (variant.kind == kind) names.push_back(variant.name);
  }
  return names;
}

Subject megatron_checkpoint_function() {
  Subject subject;
  subject.name = "megatron-checkpoint-function";
  subject.description = "Megatron-LM's CheckpointFunction (tensor_parallel/random.py), recheck's C++ port, and the "
                        "change that clears the detached inputs' .grad after backward collected them";
  subject.change = "clearing";
  subject.oracle = "nonclearing";
  for (const Variant& variant : variants()) {
    const Variant& from = find_variant(variant.made_from.empty() ? subject.change : variant.made_from);
    std::string differs_by;
    for (const std::string& decision : decisions_taken_otherwise(variant.decisions, from.decisions)) {
      differs_by += (differs_by.empty() ? "" : ", ") + decision;
    }
    SubjectImplementation listed = variant;
    listed.differs_by = differs_by;
    subject.implementations.push_back(listed);
  }
  subject.make = [](const std::string& name) -> std::unique_ptr<CheckpointImplementation> {
    return std::make_unique<MegatronCheckpoint>(find_variant(name));
  };
  // Every property but those eager mode's memory judges: the change is held to the released
  // function's floor (memory-floor), and its fixed-seed reports stay as they were.
  subject.properties = {"grads-bitwise", "outputs-bitwise", "recompute-fidelity", "grads-match-eager",
                        "rng-restored",  "errors-match",    "no-side-effects",   "flag-in-body",
                        "stash-kept",    "stash-grads",     "grad-released",     "memory-floor",
                        "no-extra-allocations", "hooks-match-eager", "hooks-bitwise",
                        "module-state-matches-eager"};
  subject.leaves_out = {
      {"memory-eager-floor", "the change is held to the released function's floor (memory-floor) instead"},
      {"discard-own-outputs", "CheckpointFunction has no discard (CheckpointWithoutOutput's)"},
      {"discard-recomputed", "CheckpointFunction has no discard (CheckpointWithoutOutput's)"}};
  // The script runs megatron-core's function, with recheck's wrapper of the PR's change around it
  // for the change's implementations.
  subject.exported_as = [](const std::string& name) {
    const bool clears = name != "nonclearing" && name.find("clearing") != std::string::npos;
    return clears ? "megatron-clearing" : "megatron";
  };
  return subject;
}

const Variant& find_variant(const std::string& name) {
  std::string known;
  for (const Variant& variant : variants()) {
    if (variant.name == name) return variant;
    known += (known.empty() ? "" : ", ") + variant.name;
  }
  throw std::invalid_argument("unknown variant '" + name + "' (known: " + known + ")");
}

}  // namespace recheck
