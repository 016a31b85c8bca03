"""PyTorch's non-reentrant checkpoint, nested, loses autograd's in-place check.

A body multiplies a tensor by a weight, then halves that tensor in place. Eager autograd refuses
the backward ("one of the variables needed for gradient computation has been modified by an
inplace operation"), and so does one non-reentrant checkpoint around the body. The same body in
a checkpoint nested inside another non-reentrant checkpoint runs backward without an error and
returns a gradient computed from data the forward never used, a different one with early_stop
on and off. Found by recheck (subject torch-checkpoint-non-reentrant, property
recompute-fidelity); needs torch alone. Exit 1 while the nested checkpoint stays silent.

    python3 torch_non_reentrant_nested_inplace_no_error.py
"""
import torch
from torch.utils.checkpoint import checkpoint


def body(a, w):
    y = a @ w
    a.mul_(0.5)  # after the product saved `a` for the gradient of `w`
    return y


def backward_error(run):
    try:
        torch.autograd.grad(run().sum(), w)
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return None


torch.manual_seed(0)
b = torch.randn(2, 2)
w = torch.randn(2, 2, requires_grad=True)
print(f"torch {torch.__version__}")
eager = backward_error(lambda: body(b + b, w))
single = backward_error(lambda: checkpoint(body, b + b, w, use_reentrant=False))
print(f"eager autograd:                 {eager}")
print(f"one non-reentrant checkpoint:   {single}")
silent = []
for early_stop in (True, False):
    def outer(b, w):
        return checkpoint(body, b + b, w, use_reentrant=False, early_stop=early_stop)

    nested = backward_error(lambda: checkpoint(outer, b, w, use_reentrant=False, early_stop=early_stop))
    print(f"nested, early_stop={early_stop!s:5}:      {nested}")
    if nested is None:
        grad = torch.autograd.grad(checkpoint(outer, b, w, use_reentrant=False, early_stop=early_stop).sum(), w)[0]
        silent.append(f"early_stop={early_stop}: gradient {[round(g, 4) for g in grad.flatten().tolist()]}")
assert eager is not None and single is not None, "eager autograd no longer refuses this body"
assert not silent, "nested non-reentrant checkpoint returned a gradient where eager autograd raises: " + "; ".join(silent)
