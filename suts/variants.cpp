// The named variants of the port (suts/checkpoint.h): the change, the oracle, the mutants, the
// equivalent rewrites, the fixes of the released function and the crashing test variants.
#include "suts/checkpoint.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/torch_version.h"

namespace recheck {

const std::vector<Variant>& variants() {
  // The change under test with `fields` set: a mistake, a rewrite, a fix, a fix and a mistake in
  // it, or a crash.
  auto change_with = [](std::initializer_list<bool CheckpointOptions::*> fields) {
    CheckpointOptions options;
    options.clear_detached_grads = true;
    for (bool CheckpointOptions::*field : fields) options.*field = true;
    return options;
  };
  // Each mutant is the change under test plus one mistake.
  auto mutant = [&](const char* name, const char* description, bool CheckpointOptions::*mistake) {
    return Variant{name, std::string("mutant: ") + description, change_with({mistake}), /*is_mutant=*/true};
  };
  // A correct rewrite of the change: the change under test written another way.
  auto equivalent = [&](const char* name, const char* description, bool CheckpointOptions::*rewrite) {
    Variant variant{name, std::string("equivalent: ") + description, change_with({rewrite}), /*is_mutant=*/false};
    variant.is_equivalent = true;
    return variant;
  };
  // The change under test plus a fix of something the released function gets wrong: where the
  // oracle fails a property the fix is about, the verdict is `fixed`.
  auto fix = [&](const char* name, const char* description, bool CheckpointOptions::*fixed) {
    Variant variant{name, std::string("fix: ") + description, change_with({fixed}), /*is_mutant=*/false};
    variant.is_fix = true;
    return variant;
  };
  // A mistake in a fix: the change under test, the fix, and one mistake in the fix.
  auto fix_mutant = [&](const char* name, const char* description, bool CheckpointOptions::*fixed,
                        bool CheckpointOptions::*mistake) {
    return Variant{name, std::string("mutant: ") + description, change_with({fixed, mistake}), /*is_mutant=*/true};
  };
  // Only a case with an autocast dtype other than the device type's default tells it from the
  // oracle: float16 on CPU (libtorch 2.1 and later) or bfloat16 on CUDA.
  // Putting the flag back as it was found needs the error path too: an error leaves Megatron's
  // flag set, and a later forward would otherwise put that leftover back instead of unsetting it.
  static const Variant flag_restored = [&fix] {
    Variant variant = fix("flag-restored-after-nesting",
                          "puts the is-checkpointing flag back as forward and backward found it (unset when they "
                          "raise), so a body's ops after a nested checkpoint still read it set",
                          &CheckpointOptions::restore_flag_after_nesting);
    variant.options.reset_flag_on_error = true;
    return variant;
  }();
  static const Variant dtype_lost = [&fix_mutant] {
    Variant variant = fix_mutant("autocast-dtype-lost",
                                 "autocast-restored, but it restores whether autocast was on, not its dtype (the device's "
                                 "default: CPU bfloat16, CUDA float16)",
                                 &CheckpointOptions::restore_autocast, &CheckpointOptions::autocast_dtype_lost);
    if (!compat::kCpuAutocastHasFloat16) {
      variant.cannot_be_killed_on_cpu = std::string("only a float16 autocast case tells it from the oracle on CPU, and CPU "
                                                    "autocast casts to float16 from libtorch 2.1 (this build: ") +
                                        TORCH_VERSION + ")";
    }
    return variant;
  }();
  static const std::vector<Variant> all = {
      {"clearing", "the change under test: resets .grad of detached inputs after collecting it",
       CheckpointOptions{/*clear_detached_grads=*/true}, /*is_mutant=*/false},
      {"nonclearing", "Megatron before the change: the oracle",
       CheckpointOptions{/*clear_detached_grads=*/false}, /*is_mutant=*/false},
      mutant("clear-before-collect", "resets .grad before collecting it", &CheckpointOptions::clear_before_collect),
      mutant("zero-grad-in-place", "zeroes .grad in place instead of resetting it",
             &CheckpointOptions::zero_grad_in_place),
      mutant("skip-rng-restore", "does not restore the RNG states after recomputing",
             &CheckpointOptions::skip_restore_rng_after_recompute),
      mutant("skip-forward-rng", "recomputes without setting the forward RNG states",
             &CheckpointOptions::skip_set_forward_rng),
      mutant("cpu-rng-only", "saves and restores the CPU RNG state only", &CheckpointOptions::rng_cpu_only),
      mutant("device-rng-only", "saves and restores the device RNG state only", &CheckpointOptions::rng_device_only),
      mutant("tracker-by-reference", "saves the tracker's live states instead of a copy",
             &CheckpointOptions::tracker_saved_by_reference),
      mutant("recompute-no-grad", "recomputes with grad mode off", &CheckpointOptions::recompute_without_grad),
      mutant("flag-left-set", "leaves the is-checkpointing flag set after backward", &CheckpointOptions::leave_flag_set),
      mutant("free-grad-storage", "frees the collected gradient's storage (x.grad.data = torch.empty(0))",
             &CheckpointOptions::free_grad_storage),
      mutant("clear-caller-grads", "resets .grad of the caller's tensors instead of the detached inputs",
             &CheckpointOptions::clear_caller_grads),
      mutant("clear-all-live", "resets .grad of the detached inputs of every backward in progress (breaks nesting)",
             &CheckpointOptions::clear_all_live),
      mutant("restore-not-exception-safe", "restores the RNG states only when recomputation succeeded",
             &CheckpointOptions::restore_not_exception_safe),
      mutant("detach-drops-requires-grad", "detaches inputs without keeping requires_grad",
             &CheckpointOptions::detach_drops_requires_grad),
      mutant("detach-forces-requires-grad", "makes every floating detached input require grad",
             &CheckpointOptions::detach_forces_requires_grad),
      mutant("args-out-of-order", "re-merges tensor and non-tensor arguments as tensors first",
             &CheckpointOptions::args_remerged_out_of_order),
      mutant("distributed-not-restored", "recomputes from the distributed chunk without gathering args[0]",
             &CheckpointOptions::distributed_input_not_restored),
      mutant("grads-paired-unfiltered", "keeps the outputs that require grad but pairs them with the unfiltered grads",
             &CheckpointOptions::grads_paired_unfiltered),
      mutant("keeps-last-grads", "keeps the last collected gradients alive, as a debugging aid",
             &CheckpointOptions::keep_last_grads),
      mutant("returns-grad-copies", "returns a copy of each collected gradient instead of the gradient itself",
             &CheckpointOptions::return_grad_copies),
      mutant("materializes-zero-grads", "hands back a zero tensor where the collected gradient is undefined",
             &CheckpointOptions::materialize_zero_grads),
      mutant("rng-states-deep-copied", "saves deep copies of the RNG states (a second copy of each)",
             &CheckpointOptions::deep_copy_rng_states),
      mutant("flag-set-after-body", "sets the is-checkpointing flag once the body has run or raised, in forward and in backward",
             &CheckpointOptions::set_flag_after_body),
      mutant("detached-inputs-freed", "frees each detached input's data after collecting its gradient "
             "(inp.data = torch.empty(0))", &CheckpointOptions::free_detached_inputs),
      mutant("rng-rewound-on-error", "puts the RNG states back as forward found them when its body raises",
             &CheckpointOptions::rng_rewound_on_error),
      fix_mutant("autocast-on-the-function",
                 "autocast-restored, but the state is kept on the function, not per call: every recomputation runs "
                 "under the state the last forward recorded",
                 &CheckpointOptions::restore_autocast, &CheckpointOptions::autocast_recorded_per_function),
      dtype_lost,
      equivalent("restore-order-reversed", "sets the tracker, device and CPU states in the reverse order",
                 &CheckpointOptions::restore_rng_reversed),
      equivalent("clear-requiring-grad-only", "resets .grad only on the detached inputs that require grad",
                 &CheckpointOptions::clear_only_requiring_grad),
      equivalent("grads-moved-out", "moves each gradient out of .grad as it collects, instead of copying the handle",
                 &CheckpointOptions::move_grads_out),
      fix("flag-reset-on-error", "unsets the is-checkpointing flag when forward or backward raises (try/finally)",
          &CheckpointOptions::reset_flag_on_error),
      flag_restored,
      fix("autocast-restored",
          "records the autocast state (CPU and CUDA) in forward and recomputes under it, as torch.utils.checkpoint does",
          &CheckpointOptions::restore_autocast),
      {"aborts", "test variant: aborts inside backward, to show that recheck run isolates a crashing case",
       change_with({&CheckpointOptions::abort_in_backward}), /*is_mutant=*/false},
      {"segfaults", "test variant: writes through a null pointer inside backward (a segmentation fault)",
       change_with({&CheckpointOptions::segfault_in_backward}), /*is_mutant=*/false},
      // The oracle under another name: only the change's own claims, grad-released and
      // memory-floor, can tell it from clearing.
      {"no-clear", "mutant: the change left out", CheckpointOptions{/*clear_detached_grads=*/false}, /*is_mutant=*/true},
  };
  return all;
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
