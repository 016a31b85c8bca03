"""A checkpoint function whose backward never returns (as one that waits on a lock its own
thread holds), but for the body recheck's probe of its calling convention runs (one float64
tensor of 2 elements): every case that reaches its backward hangs. Written for the test of
recheck's per-case time limit (tests/python/conventions_test.cpp)."""
import threading

import torch


def _wait_unless_probed(grad):
    if grad.dtype != torch.float64 or tuple(grad.shape) != (2,):
        threading.Event().wait()  # never set
    return grad


def checkpoint(function, *args):
    """function(*args), not recomputed; a backward through its outputs hangs."""
    outputs = function(*args)
    for output in outputs if isinstance(outputs, tuple) else (outputs,):
        if torch.is_tensor(output) and output.requires_grad:
            output.register_hook(_wait_unless_probed)
    return outputs
