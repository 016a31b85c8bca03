// The subject megatron-checkpoint-without-output: Megatron's CheckpointWithoutOutput, whose outputs
// the caller discards after later ops read them and whose recomputation a later tensor's gradient
// triggers; as released in megatron-core, with the clearing change in its backward (the change under
// test), and with the mutants of variants.py beside this file (the module
// recheck_megatron_without_output, embedded in recheck). Cases for it hold checkpoints without
// output, discard ops and Megatron's CheckpointFunction around and inside them. Eager mode judges
// what the released function fails alike (pre-existing); what the change or a mutant fails where the
// released function holds is a regression. docs/adding-a-subject.md walks through a subject.
#include "embedded/megatron_without_output_py.h"
#include "python/bridge.h"
#include "python/subjects.h"
#include "suts/subject.h"

namespace recheck::python {

namespace {

constexpr const char* kModule = "recheck_megatron_without_output";

// The released function first (the oracle), then the change and the mutants, each a function of
// the module.
const std::vector<PythonVariant>& variants() {
  static const std::vector<PythonVariant> all = {
      {"megatron-without-output",
       VariantKind::oracle, "python:recheck_megatron_without_output:released",
       "Megatron's CheckpointWithoutOutput as released in megatron-core (fp8=None)"},
      {"megatron-without-output-clearing",
       VariantKind::change, "python-change:recheck_megatron_without_output:clearing",
       "the clearing change in CheckpointWithoutOutputFunction's backward (detached inputs' .grad reset)"},
      {"megatron-without-output-managed",
       VariantKind::oracle, "python:recheck_megatron_without_output:managed",
       "each discard made by the tree's manager, one hook recomputing its checkpoints in order (a Megatron-LM "
       "tree with CheckpointWithoutOutputManager or MHCCheckpointManager)"},
      {"megatron-without-output-rng-not-restored",
       VariantKind::mutant, "python:recheck_megatron_without_output:rng_not_restored",
       "the recomputation runs from backward's RNG states, not forward's"},
      {"megatron-without-output-not-copied-back",
       VariantKind::mutant, "python:recheck_megatron_without_output:not_copied_back",
       "the recomputation gives the outputs their storage back without the recomputed bytes"},
      {"megatron-without-output-inputs-offloaded",
       VariantKind::mutant, "python:recheck_megatron_without_output:inputs_offloaded",
       "the discard frees the arguments' storage too, until the recomputation gives it back"},
  };
  return all;
}

Subject megatron_without_output() {
  Subject subject;
  subject.name = "megatron-checkpoint-without-output";
  subject.description = "Megatron's CheckpointWithoutOutput (megatron-core), through the Python bridge";
  subject.change = "megatron-without-output-clearing";
  subject.oracle = "megatron-without-output";
  // Held against eager mode and the released function; the clearing change's claims (grad-released,
  // memory-floor, no-extra-allocations) as for CheckpointFunction, and memory against eager mode's
  // floor too; discards free and recompute only the checkpoint's own outputs. Megatron's
  // CheckpointWithoutOutput sets no is-checkpointing flag: flag-in-body is left out.
  subject.properties = {"grads-bitwise",      "outputs-bitwise",      "recompute-fidelity", "grads-match-eager",
                        "rng-restored",       "errors-match",         "no-side-effects",    "stash-kept",
                        "stash-grads",        "grad-released",        "memory-floor",       "no-extra-allocations",
                        "memory-eager-floor", "discard-own-outputs",  "discard-recomputed",
                        "hooks-match-eager", "hooks-bitwise",
                        "module-state-matches-eager"};
  subject.leaves_out = {{"flag-in-body", "CheckpointWithoutOutput sets no is-checkpointing flag"}};
  // A discarded output a caller's backward reads before its recomputation (a hook autograd reaches
  // too late, a body returning its argument) is freed memory: libtorch reads it and the process
  // crashes, with the released function as with its variants.
  subject.cases_may_crash = true;
  // The script runs megatron-core's CheckpointWithoutOutput and CheckpointFunction, with the
  // clearing change in both for the change (python/pr_wrapper.py); a mutant's script runs them as
  // released.
  subject.exported_as = [](const std::string& name) {
    return name == "megatron-without-output-clearing" ? "megatron-clearing" : "megatron";
  };
  return subject;
}

}  // namespace

void register_megatron_without_output() {
  const Subject subject = megatron_without_output();
  register_python_subject({kModule, "python/megatron_without_output/variants.py", embedded::kMegatronWithoutOutputPy},
                          variants(), subject, subject.oracle);
}

}  // namespace recheck::python
