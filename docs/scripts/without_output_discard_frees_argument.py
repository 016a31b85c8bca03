#!/usr/bin/env python3
"""megatron-core's CheckpointWithoutOutput frees the caller's own tensor when the checkpointed
function returns its argument (docs/without-output.md, "Findings"). Standalone: torch and
megatron-core (checked with 0.16.1), on CPU.

  python without_output_discard_frees_argument.py

Checkpoints an identity function of x, reads the output with a matmul (which saves it), and
discards the output with the recomputation on the matmul's gradient, as Megatron's layers do.
The output the autograd Function returns for an argument returned as it is is a view of x, so
the discard resizes x's storage to nothing; backward then cannot read it. Eager mode computes
the same gradients without a checkpoint. Exit 1 when x lost its storage (the finding), 0 when
it kept it.
"""
import sys
import warnings

import torch

warnings.simplefilter("ignore")  # megatron-core warns about missing Apex and Transformer Engine
from megatron.core.tensor_parallel import random as megatron_random  # noqa: E402

if not torch.cuda.is_available():
    # On CPU, Megatron's device RNG helpers have no device to read: stand-ins that keep nothing.
    megatron_random._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    megatron_random._set_cuda_rng_state = lambda *args, **kwargs: None

device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.randn(4, 3, device=device, requires_grad=True)
w = torch.randn(3, 3, device=device, requires_grad=True)
bytes_before = x.untyped_storage().nbytes()
checkpoint = megatron_random.CheckpointWithoutOutput(fp8=None)
y = checkpoint.checkpoint(lambda a: a, x)
z = y @ w
checkpoint.discard_output_and_register_recompute(z)
bytes_after = x.untyped_storage().nbytes()
print(f"x's storage: {bytes_before} bytes before the discard, {bytes_after} after")
try:
    z.sum().backward()
    print("backward: ok")
except RuntimeError as error:
    print(f"backward: RuntimeError: {str(error)[:160]}")
sys.exit(1 if bytes_after < bytes_before else 0)
