"""The subject megatron-checkpoint-without-output: Megatron's CheckpointWithoutOutput (megatron-core's
megatron.core.tensor_parallel.random), as released, with the clearing change applied to its backward,
and plausible mistakes in it (mutants). Each variant is a function of no arguments that makes one
checkpoint object with Megatron's interface: `checkpoint(run_function, *args)` runs the body without
a graph and returns its outputs; `discard_output_and_register_recompute(hook)` frees their storage
and registers the recomputation on `hook`'s gradient. The cases' plain checkpoints run Megatron's
CheckpointFunction as released (`checkpoint` below). recheck's Python bridge runs this file as the
module recheck_megatron_without_output (embedded in recheck); the subject is declared beside it
(subject.cpp). docs/adding-a-subject.md walks through a subject.
"""
import functools

import torch

# How the bridge calls these (python/bridge.py, WithoutOutput).
CHECKPOINT_STYLE = "without_output"
# One code for every variant: allocations are compared between them.
CODE = "megatron.core.tensor_parallel.random:CheckpointWithoutOutput"


# megatron-core is imported on first use, not when recheck starts its interpreter (this module is
# embedded and runs then, in environments with torch alone too).
def _megatron():
    from megatron.core.tensor_parallel import random as megatron_random

    return megatron_random


def __getattr__(name):
    # MEGATRON_MODULE: the Megatron module the variants run; the bridge shims its RNG helpers on
    # CPU and reads its tracker and is-checkpointing flag.
    if name == "MEGATRON_MODULE":
        return _megatron()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checkpoint(body, distribute, *args):
    """A plain checkpoint of these cases, around or inside checkpoints without output: Megatron's
    CheckpointFunction as released (a variant may name another as its plain_checkpoint)."""
    return _megatron().CheckpointFunction.apply(body, distribute, *args)


@functools.lru_cache(maxsize=None)
def _classes():
    """The variants' classes, made once megatron-core is imported."""
    import sys

    megatron_random = _megatron()

    class ClearingFunction(megatron_random.CheckpointWithoutOutputFunction):
        """The clearing change of CheckpointFunction (Megatron-LM PR #6117) made in this backward:
        once the gradients are collected from the detached inputs, their .grad is reset."""

        @staticmethod
        def backward(ctx, *grad_outputs):
            inputs = ctx.inputs
            grads = megatron_random.CheckpointWithoutOutputFunction.backward(ctx, *grad_outputs)
            for tensor in inputs or ():
                if isinstance(tensor, torch.Tensor):
                    tensor.grad = None
            return grads

    class Clearing(megatron_random.CheckpointWithoutOutput):
        """CheckpointWithoutOutput whose checkpoint() applies ClearingFunction (the module's global,
        swapped while it runs: checkpoint() names it there)."""

        def checkpoint(self, run_function, *args):
            released_function = megatron_random.CheckpointWithoutOutputFunction
            megatron_random.CheckpointWithoutOutputFunction = ClearingFunction
            try:
                return super().checkpoint(run_function, *args)
            finally:
                megatron_random.CheckpointWithoutOutputFunction = released_function

    class RngNotRestored(megatron_random.CheckpointWithoutOutput):
        def _recompute(self, grad):
            if self.ctx is not None:
                self.rng_states = megatron_random._get_all_rng_states()
            return super()._recompute(grad)

    class NotCopiedBack(megatron_random.CheckpointWithoutOutput):
        def _recompute(self, grad):
            outputs = self.outputs if self.ctx is not None else None
            super()._recompute(grad)
            # What the copy wrote is thrown away: the storage keeps its size, its bytes are zeros.
            with torch.no_grad():
                for output in outputs or ():
                    output.untyped_storage().fill_(0)

    # CheckpointFunction with the PR's change, as recheck's bridge applies it (python/pr_wrapper.py).
    clearing_function = sys.modules["recheck_bridge"].clearing(megatron_random.CheckpointFunction, megatron_random)
    return {"Clearing": Clearing, "RngNotRestored": RngNotRestored, "NotCopiedBack": NotCopiedBack,
            "clearing_function": clearing_function}


def released():
    """CheckpointWithoutOutput as released, made as Megatron's layers make it without FP8
    (fp8=None: TransformerConfig's default)."""
    return _megatron().CheckpointWithoutOutput(fp8=None)


def clearing():
    """The change: CheckpointWithoutOutput with the clearing change in its backward, and the plain
    checkpoints around and inside it with the PR's change to CheckpointFunction."""
    return _classes()["Clearing"](fp8=None)


def _clearing_checkpoint(body, distribute, *args):
    return _classes()["clearing_function"].apply(body, distribute, *args)


clearing.plain_checkpoint = _clearing_checkpoint


# Mutants: each one plausible mistake in CheckpointWithoutOutput.

def rng_not_restored():
    """The recomputation runs from the RNG states backward is in, not forward's ("the hook runs
    right after forward's step anyway")."""
    return _classes()["RngNotRestored"](fp8=None)


def not_copied_back():
    """The recomputation gives the outputs their storage back but not the recomputed bytes ("the
    consumers' backward reads ctx.outputs"): every caller of a discarded output reads zeros."""
    return _classes()["NotCopiedBack"](fp8=None)
