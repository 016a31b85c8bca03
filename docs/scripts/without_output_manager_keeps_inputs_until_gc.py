#!/usr/bin/env python3
"""Megatron-LM's checkpoint managers (CheckpointWithoutOutputManager on main, MHCCheckpointManager
on dev) and the checkpoints made with them refer to each
other (the checkpoint's ckpt_manager, the manager's checkpoints), so a checkpoint whose
recomputation never runs keeps its saved inputs and RNG states after the caller has let go of
everything: only Python's cycle collector frees them (docs/without-output.md, "Findings").
Standalone: torch and a Megatron-LM source tree that has a manager (main, checked at d98e8a64;
dev, at d48bd6be) first on PYTHONPATH; megatron-core 0.16.1 has none. On CPU.

  PYTHONPATH=MEGATRON_LM_TREE python without_output_manager_keeps_inputs_until_gc.py

Checkpoints a function of x as Megatron's hyper-connection code does (a manager, checkpoints made
with ckpt_manager=manager), reads its output, and has the manager discard the outputs with the
recomputation on a tensor backward never reaches (here a forward whose result is not used, as in
an evaluation step that runs with grad enabled). Then the caller drops every reference, and the
script asks whether x's storage is still alive; the same without a manager frees it at once.
Exit 1 when the manager's checkpoint kept x alive until gc.collect() (the finding), 0 when not,
2 when the tree has no manager.
"""
import gc
import sys
import warnings
import weakref

import torch

warnings.simplefilter("ignore")  # Megatron warns about missing Apex and Transformer Engine
from megatron.core.tensor_parallel import random as megatron_random  # noqa: E402

Manager = getattr(megatron_random, "CheckpointWithoutOutputManager", None) or getattr(megatron_random,
                                                                                      "MHCCheckpointManager", None)
if Manager is None:
    print(f"{megatron_random.__file__} has no checkpoint manager: put a Megatron-LM tree that has one "
          "(main or dev) first on PYTHONPATH", file=sys.stderr)
    sys.exit(2)
if not torch.cuda.is_available():
    # On CPU, Megatron's device RNG helpers have no device to read: stand-ins that keep nothing.
    megatron_random._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    megatron_random._set_cuda_rng_state = lambda *args, **kwargs: None


def step(with_manager):
    """One forward whose result backward never reads; returns a weak reference to x's storage
    holder (x itself) once the caller has dropped every reference it had."""
    x = torch.randn(256, 256, requires_grad=True)
    watched = weakref.ref(x)
    manager = Manager() if with_manager else None
    checkpoint = megatron_random.CheckpointWithoutOutput(fp8=None, ckpt_manager=manager)
    y = checkpoint.checkpoint(torch.tanh, x)
    z = y * 2.0
    if manager is not None:
        manager.discard_all_outputs_and_register_unified_recompute(z)
    else:
        checkpoint.discard_output_and_register_recompute(z)
    del x, y, z, checkpoint, manager
    return watched


gc.disable()  # as Megatron's training loop with --manual-gc; the collector's timing is otherwise chance
alone = step(with_manager=False)
print(f"without a manager: x {'alive' if alone() is not None else 'freed'} once the caller let go")
managed = step(with_manager=True)
kept = managed() is not None
print(f"with {Manager.__name__}: x {'alive' if kept else 'freed'} once the caller let go", end="")
gc.collect()
print(f"; after gc.collect(): {'alive' if managed() is not None else 'freed'}")
sys.exit(1 if kept and alone() is None and managed() is None else 0)
