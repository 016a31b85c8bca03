"""PyTorch's non-reentrant checkpoint, nested, trips an internal assert when the inner body raises
while recomputing.

The inner checkpoint's forward, run again inside the outer one's recomputation, raises. Its
saved-tensor hooks are still pushed when the exception leaves (the generator that pushed them is
suspended, not closed), the outer recomputation's hook context pops them in its place, and when
the generator is finally collected it pops a stack that is already empty: `RuntimeError:
is_initialized && !tls.stack.empty() INTERNAL ASSERT FAILED ... please report a bug to PyTorch`,
printed as an exception Python ignores. One checkpoint alone does not do it. Found by recheck
(subject torch-checkpoint-non-reentrant, a body that raises only in recomputation, nested);
needs torch alone. Exit 1 while the assert fires.

    python3 torch_non_reentrant_raise_in_nested_recompute_assert.py
"""
import gc
import sys

import torch
from torch.utils.checkpoint import checkpoint

ignored = []
sys.unraisablehook = lambda unraisable: ignored.append(f"{type(unraisable.exc_value).__name__}: {unraisable.exc_value}")
calls = [0]


def inner(a):
    calls[0] += 1
    if calls[0] > 1:
        raise ValueError("raised while recomputing")
    return a.sin().tanh()


def outer(a):
    return checkpoint(inner, a, use_reentrant=False).exp()


print(f"torch {torch.__version__}")
x = torch.randn(4, requires_grad=True)
try:
    checkpoint(outer, x, use_reentrant=False).sum().backward()
except ValueError as error:
    print(f"backward raised, as it should: {error}")
gc.collect()
for line in ignored:
    print(f"ignored: {line.splitlines()[0][:160]}")
assert not ignored, f"{len(ignored)} exception(s) PyTorch's checkpoint raised while collected, first: {ignored[0][:160]}"
