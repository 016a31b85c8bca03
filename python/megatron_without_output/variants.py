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


def cannot_run():
    """Why the variants cannot run on this Megatron, or None: CheckpointWithoutOutput came in
    Megatron-LM 3b141a2471 (2025-04-05), megatron-core 0.13."""
    megatron_random = _megatron()
    if not hasattr(megatron_random, "CheckpointWithoutOutput"):
        return (f"{megatron_random.__file__} has no CheckpointWithoutOutput (Megatron-LM since 3b141a2471, "
                f"2025-04-05; megatron-core 0.13 or later)")
    return None


def takes_non_tensor_arguments():
    """Whether this Megatron's CheckpointWithoutOutput takes None and literals among its arguments:
    Megatron-LM's since 7cdba422b8 (2026-08-17) saves them apart from the tensors (_save_args_to_ctx); 0.16.1 hands
    every argument to save_for_backward, which refuses them."""
    return hasattr(_megatron(), "_save_args_to_ctx")


def checkpoint(body, distribute, *args):
    """A plain checkpoint of these cases, around or inside checkpoints without output: Megatron's
    CheckpointFunction as released (a variant may name another as its plain_checkpoint)."""
    return _megatron().CheckpointFunction.apply(body, distribute, *args)


@functools.lru_cache(maxsize=None)
def _classes():
    """The variants' classes, made once megatron-core is imported."""
    import sys

    megatron_random = _megatron()

    bridge = sys.modules["recheck_bridge"]
    # The change made in CheckpointWithoutOutputFunction's backward, as export-python's scripts
    # make it too (python/pr_wrapper.py).
    Clearing = bridge.clearing_without_output(megatron_random)

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

    class InputsOffloaded(megatron_random.CheckpointWithoutOutput):
        def checkpoint(self, run_function, *args):
            self.offloaded = [(a, None) for a in args if isinstance(a, torch.Tensor)]
            return super().checkpoint(run_function, *args)

        def discard_output_and_register_recompute(self, hook_tensor):
            super().discard_output_and_register_recompute(hook_tensor)
            # The arguments' bytes go to a private copy, their storage is freed...
            kept = []
            for argument, _ in self.offloaded:
                storage = argument.untyped_storage()
                kept.append((argument, storage.clone() if storage.nbytes() else None))
                storage.resize_(0)
            self.offloaded = kept

        def _recompute(self, grad):
            # ... and given back before the recomputation reads them.
            for argument, copy in self.offloaded:
                if copy is not None and argument.untyped_storage().nbytes() == 0:
                    argument.untyped_storage().resize_(copy.nbytes())
                    argument.untyped_storage().copy_(copy)
            self.offloaded = []
            return super()._recompute(grad)

    # CheckpointFunction with the PR's change, as recheck's bridge applies it (python/pr_wrapper.py).
    clearing_function = bridge.clearing(megatron_random.CheckpointFunction, megatron_random)
    return {"Clearing": Clearing, "RngNotRestored": RngNotRestored, "NotCopiedBack": NotCopiedBack,
            "InputsOffloaded": InputsOffloaded, "clearing_function": clearing_function}


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


# Managers: newer Megatron-LM trees group the checkpoints without output of a layer under one
# manager (CheckpointWithoutOutputManager on main, MHCCheckpointManager on dev), which discards
# all their outputs and registers one hook that recomputes them in forward order.
_MANAGERS = ("CheckpointWithoutOutputManager", "MHCCheckpointManager")


def _manager_class():
    megatron_random = _megatron()
    for name in _MANAGERS:
        if hasattr(megatron_random, name):
            return getattr(megatron_random, name)
    return None


def managed():
    """CheckpointWithoutOutput as released, each discard of these cases made by the tree's manager:
    the checkpoints it names added in order, then one discard_all_outputs_and_register_unified_recompute
    on the hook. Runs where megatron.core.tensor_parallel.random has a manager (a Megatron-LM tree
    first on PYTHONPATH)."""
    return _megatron().CheckpointWithoutOutput(fp8=None)


def _cannot_run_managed():
    if cannot_run():
        return cannot_run()
    if _manager_class() is None:
        return (f"{_megatron().__file__} has no checkpoint manager ({' or '.join(_MANAGERS)}): "
                f"megatron-core 0.16.1 has none; put a Megatron-LM source tree that has one (main since "
                f"2026, dev) first on PYTHONPATH")
    return None


def _discard_with_manager(objects, hook):
    manager = _manager_class()()
    for one in objects:
        one.ckpt_manager = manager
        manager.add_checkpoint(one)
    manager.discard_all_outputs_and_register_unified_recompute(hook)


managed.cannot_run = _cannot_run_managed
managed.discard_together = _discard_with_manager


# Mutants: each one plausible mistake in CheckpointWithoutOutput.

def rng_not_restored():
    """The recomputation runs from the RNG states backward is in, not forward's ("the hook runs
    right after forward's step anyway")."""
    return _classes()["RngNotRestored"](fp8=None)


def not_copied_back():
    """The recomputation gives the outputs their storage back but not the recomputed bytes ("the
    consumers' backward reads ctx.outputs"): every caller of a discarded output reads zeros."""
    return _classes()["NotCopiedBack"](fp8=None)


def inputs_offloaded():
    """The discard frees the arguments' storage with the outputs', keeping their bytes aside until
    the recomputation gives them back ("only the recomputation reads them"): the caller's own
    tensors are empty in between, though nothing autograd computes changes."""
    return _classes()["InputsOffloaded"](fp8=None)
