#!/usr/bin/env python3
"""Does Megatron's CheckpointFunction recompute a body's dropout with the mask its forward drew
when the RNG tracker is the one Megatron makes for CUDA graphs? Written by hand (not by recheck
export-python): a GPU check of a lead recheck found on CPU, where the bridge stands CUDA's
generator objects in (docs/python.md, "Every checkpoint function the trees hold").

With model_parallel_cuda_manual_seed(..., use_cudagraphable_rng=True), Megatron's RNG helpers
read the device generator with graphsafe_get_state(), which returns a generator that *shares*
the device generator's state (PyTorch's CUDAGeneratorImpl::graphsafe_get_state), not a copy. So
CheckpointFunction.forward's saved RNG states (_get_all_rng_states) would be live: the body's
draws in forward advance them, and backward's recomputation would start from where forward ended
and draw another dropout mask. On CPU, recheck's emulation of that sharing shows exactly this
(recompute-fidelity, grads-match-eager and rng-restored fail where the plain tracker's run
holds); this script asks a real GPU.

    python3 THIS_SCRIPT

Exit codes: 0 the recomputation drew forward's masks (no bug: the lead is wrong), 1 it did not
(the bug, with the evidence), 77 skipped (no CUDA device, or a Megatron whose seeding takes no
use_cudagraphable_rng).
"""
import inspect
import sys

import torch

if not torch.cuda.is_available():
    print("skipped: needs a CUDA device (torch.cuda.is_available() is False)")
    sys.exit(77)

from megatron.core.tensor_parallel import random as megatron_random  # noqa: E402

seed = megatron_random.model_parallel_cuda_manual_seed
parameters = inspect.signature(seed).parameters
if "use_cudagraphable_rng" not in parameters:
    print(f"skipped: {megatron_random.__file__}'s model_parallel_cuda_manual_seed takes no use_cudagraphable_rng")
    sys.exit(77)
# One process, no parallel state: every rank 0, every group of one, the tracker made anew.
options = {name: 0 for name in parameters if name.endswith("_rank")}
options.update({name: 1 for name in parameters if name.endswith("_world_size")})
if "force_reset_rng" in parameters:
    options["force_reset_rng"] = True
seed(1234, use_cudagraphable_rng=True, **options)


def through_tracker(x):
    with megatron_random.get_cuda_rng_tracker().fork():
        return torch.nn.functional.dropout(x, p=0.5)


def default_generator(x):
    return torch.nn.functional.dropout(x, p=0.5)


failed = []
for name, body in (("the tracker's model-parallel state", through_tracker), ("the device's default state", default_generator)):
    x = torch.rand(256, 256, device="cuda") + 1.0  # no zeros: a zero output is a dropped element
    x.requires_grad_(True)
    out = megatron_random.CheckpointFunction.apply(body, False, x)
    forward_mask = out.detach() != 0
    out.sum().backward()
    recomputed_mask = x.grad != 0  # dropout's gradient is its recomputed mask, scaled
    differ = int((forward_mask != recomputed_mask).sum())
    print(f"{name}: {differ} of {forward_mask.numel()} elements kept by one mask and dropped by the other")
    if differ:
        failed.append(name)

if failed:
    print("FAIL: the recomputation drew other masks than forward with the CUDA-graph tracker: " + ", ".join(failed))
    sys.exit(1)
print("OK: the recomputation drew forward's masks")
