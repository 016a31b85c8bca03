#!/usr/bin/env python3
"""megatron-core's CheckpointWithoutOutput, with the recomputation hook registered on one of its
own outputs (discard_output_and_register_recompute(y) where y is what checkpoint() returned):
when backward never reaches y (a forward whose result no loss reads, an evaluation step run with
grad enabled), the object is never freed, nor what it holds (its saved inputs, three RNG states:
15 KB on CPU). It refers to y (self.outputs) and y's hook to it (self._recompute), and Python's
cycle collector cannot free a tensor's hooks: gc.collect() leaves it alive too
(docs/without-output.md, "Findings"). With the hook on a later tensor (Megatron's own layers do
so), the object goes when that tensor does. Standalone: torch and megatron-core (checked with
0.16.1). On CPU.

  python without_output_hook_on_its_own_output_never_freed.py

Exit 1 when the object with the hook on its own output outlives every reference and
gc.collect() (the finding), 0 when it is freed.
"""
import gc
import sys
import warnings
import weakref

import torch

warnings.simplefilter("ignore")  # Megatron warns about missing Apex and Transformer Engine
from megatron.core.tensor_parallel import random as megatron_random  # noqa: E402

if not torch.cuda.is_available():
    # On CPU, Megatron's device RNG helpers have no device to read: stand-ins that keep nothing.
    megatron_random._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    megatron_random._set_cuda_rng_state = lambda *args, **kwargs: None


def step(hook_on_own_output):
    """One forward whose result no loss reads; a weak reference to the checkpoint object once the
    caller has dropped every reference it had."""
    x = torch.randn(4, 3, requires_grad=True)
    checkpoint = megatron_random.CheckpointWithoutOutput(fp8=None)
    y = checkpoint.checkpoint(torch.tanh, x)
    z = y * 2.0
    checkpoint.discard_output_and_register_recompute(y if hook_on_own_output else z)
    watched = weakref.ref(checkpoint)
    del x, y, z, checkpoint
    return watched


later = step(hook_on_own_output=False)
own = step(hook_on_own_output=True)
gc.collect()
print(f"hook on a later tensor: the checkpoint object {'alive' if later() is not None else 'freed'}; "
      f"hook on its own output: {'alive' if own() is not None else 'freed'} after gc.collect()")
sys.exit(1 if own() is not None and later() is None else 0)
