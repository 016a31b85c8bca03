"""A checkpoint function as code bases vendor one (diffusion and vision repositories carry their
own): checkpoint(func, inputs, params, flag), a reentrant autograd Function that saves no RNG
state, so that a recomputation draws other random numbers than its forward did. Written for
recheck's tests of calling conventions (tests/python/conventions_test.cpp)."""
import torch


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.inputs = list(args[:length])
        with torch.no_grad():
            return run_function(*ctx.inputs)

    @staticmethod
    def backward(ctx, *grads):
        detached = [x.detach().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x for x in ctx.inputs]
        with torch.enable_grad():
            outputs = ctx.run_function(*detached)
        if torch.is_tensor(outputs):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if torch.is_tensor(o) and o.requires_grad]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(x.grad if torch.is_tensor(x) else None for x in detached)


def checkpoint(func, inputs, params, flag):
    """func(*inputs), recomputed in backward when flag is set; params: the parameters it uses."""
    if flag:
        return CheckpointFunction.apply(func, len(inputs), *tuple(inputs), *tuple(params))
    return func(*inputs)
