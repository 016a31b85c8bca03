#!/usr/bin/env python3
"""megatron-core's CheckpointWithoutOutput() with its default argument fp8=False takes the FP8
path: the constructor sets self.fp8 = (fp8 is not None), so only fp8=None turns FP8 off
(docs/without-output.md, "Findings"). Without Transformer Engine the forward then raises
NameError on FP8GlobalStateManager. Standalone: torch and megatron-core (checked with 0.16.1),
without Transformer Engine.

  python without_output_fp8_default.py

Exit 1 when the default object takes the FP8 path (the finding), 0 when it does not.
"""
import sys
import warnings

import torch

warnings.simplefilter("ignore")
from megatron.core.tensor_parallel import random as megatron_random  # noqa: E402

print(f"CheckpointWithoutOutput().fp8 = {megatron_random.CheckpointWithoutOutput().fp8}, "
      f"CheckpointWithoutOutput(fp8=False).fp8 = {megatron_random.CheckpointWithoutOutput(fp8=False).fp8}, "
      f"CheckpointWithoutOutput(fp8=None).fp8 = {megatron_random.CheckpointWithoutOutput(fp8=None).fp8}")
if not torch.cuda.is_available():
    megatron_random._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    megatron_random._set_cuda_rng_state = lambda *args, **kwargs: None
x = torch.randn(3, requires_grad=True)
try:
    megatron_random.CheckpointWithoutOutput().checkpoint(torch.tanh, x)
    print("forward with the default object: ok")
except NameError as error:
    print(f"forward with the default object: NameError: {error}")
sys.exit(1 if megatron_random.CheckpointWithoutOutput(fp8=False).fp8 else 0)
