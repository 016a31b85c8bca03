// The subject torch-checkpoint-non-reentrant: PyTorch's torch.utils.checkpoint.checkpoint with
// use_reentrant=False, as released and with the variants of variants.py beside this file (the
// module recheck_torch_non_reentrant, embedded in recheck). It is its own oracle: what the released
// function fails, it fails alike (pre-existing, judged by eager mode); what a mutant fails where it
// holds is a regression. docs/adding-a-subject.md walks through it.
#include "embedded/torch_non_reentrant_py.h"
#include "python/bridge.h"
#include "python/subjects.h"
#include "suts/subject.h"

namespace recheck::python {

namespace {

constexpr const char* kModule = "recheck_torch_non_reentrant";

// Its variants: the released function first (its change and its oracle), then equivalent
// rewrites and mutants, each a function of the module.
const std::vector<PythonVariant>& variants() {
  static const std::vector<PythonVariant> all = {
      {"torch-nonreentrant",
       VariantKind::change, "python:recheck_torch_non_reentrant:released",
       "PyTorch's torch.utils.checkpoint with use_reentrant=False, as released, with the options each case draws"},
      {"torch-nonreentrant-early-stop-by-context",
       VariantKind::equivalent, "python:recheck_torch_non_reentrant:early_stop_through_context_manager",
       "early_stop set by the set_checkpoint_early_stop context manager instead of the keyword"},
      {"torch-nonreentrant-policy-as-op-list",
       VariantKind::equivalent, "python:recheck_torch_non_reentrant:policy_as_op_list",
       "the selective policy given as the list of ops to save instead of a policy function"},
      {"torch-nonreentrant-rng-not-preserved",
       VariantKind::mutant, "python:recheck_torch_non_reentrant:rng_not_preserved",
       "preserve_rng_state=False always, so the recomputation draws from backward's RNG states"},
      {"torch-nonreentrant-inputs-detached",
       VariantKind::mutant, "python:recheck_torch_non_reentrant:inputs_detached",
       "detaches the tensor arguments before checkpointing them (requires_grad kept)"},
      {"torch-nonreentrant-recompute-no-grad",
       VariantKind::mutant, "python:recheck_torch_non_reentrant:recompute_without_grad",
       "a context_fn whose recomputation context turns grad mode off"},
      {"torch-nonreentrant-keeps-recomputed",
       VariantKind::mutant, "python:recheck_torch_non_reentrant:keeps_recomputed",
       "keeps what the last recomputation returned alive, as a debugging aid"},
  };
  return all;
}

Subject torch_non_reentrant() {
  Subject subject;
  subject.name = "torch-checkpoint-non-reentrant";
  subject.description = "PyTorch's torch.utils.checkpoint.checkpoint(use_reentrant=False), through the Python bridge";
  subject.change = "torch-nonreentrant";
  subject.oracle = "torch-nonreentrant";
  // Held against eager mode and against itself; its change makes no claim (the claims of
  // Megatron's clearing change do not apply), and PyTorch keeps no is-checkpointing flag. Memory:
  // after backward it keeps nothing eager mode does not.
  judge_against_eager_and_itself(
      subject, {"PyTorch keeps no is-checkpointing flag",
                "a claim of Megatron's clearing change, which this function's change does not make",
                "torch.utils.checkpoint has no discard (Megatron's CheckpointWithoutOutput's)"});
  subject.exported_as = [](const std::string&) { return "torch-non-reentrant"; };
  return subject;
}

}  // namespace

void register_torch_non_reentrant() {
  const Subject subject = torch_non_reentrant();
  register_python_subject({kModule, "python/torch_non_reentrant/variants.py", embedded::kTorchNonReentrantPy},
                          variants(), subject, subject.change);
}

}  // namespace recheck::python
