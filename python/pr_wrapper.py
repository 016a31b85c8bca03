# The PR's change, without editing Megatron's file: backward's detach_variable is watched, each
# backward call keeps its own record (a nested checkpoint's backward runs inside its parent's),
# and once a call has returned the .grad of every tensor it detached is reset. What the
# recomputed function detaches while it runs (CheckpointWithoutOutputFunction's forward saves
# detach_variable's copies of its arguments) is not the backward's: not recorded.
_records = []
_watched = set()


class _Record:
    def __init__(self):
        self.detached = []
        self.in_function = 0  # the recomputed function's calls running


def clearing(function, module):
    if module.__name__ not in _watched:
        detach = module.detach_variable

        def recording_detach(inputs):
            detached = detach(inputs)
            if _records and _records[-1].in_function == 0:
                _records[-1].detached.extend(t for t in detached if isinstance(t, torch.Tensor))
            return detached

        module.detach_variable = recording_detach
        _watched.add(module.__name__)

    def backward(ctx, *grad_outputs):
        record = _Record()
        run_function = getattr(ctx, "run_function", None)
        if run_function is not None:
            def watched_function(*args):
                record.in_function += 1
                try:
                    return run_function(*args)
                finally:
                    record.in_function -= 1

            ctx.run_function = watched_function
        _records.append(record)
        try:
            grads = function.backward(ctx, *grad_outputs)
        finally:
            _records.pop()
            # The node outlives this call where a caller keeps an output: it must not keep the
            # record, and with it the detached inputs, alive.
            if run_function is not None:
                ctx.run_function = run_function
        detached, record.detached = record.detached, []
        for tensor in detached:
            tensor.grad = None
        return grads

    # The same name as the function wrapped: autograd names the node after it, and error
    # messages quote that name.
    return type(function.__name__, (function,), {"backward": staticmethod(backward)})


def clearing_without_output(module):
    """The same change made in CheckpointWithoutOutput's backward (module's
    CheckpointWithoutOutputFunction): once it has collected the gradients from the detached
    recomputation inputs (ctx.inputs), their .grad is reset. Returns a subclass of
    module.CheckpointWithoutOutput whose checkpoint() applies that function (the module's global,
    swapped while checkpoint() runs: it names the function there)."""
    released = module.CheckpointWithoutOutputFunction

    def backward(ctx, *grad_outputs):
        inputs = getattr(ctx, "inputs", None)  # none without a recomputation: backward raises as released
        grads = released.backward(ctx, *grad_outputs)
        for tensor in inputs or ():
            if isinstance(tensor, torch.Tensor):
                tensor.grad = None
        return grads

    function = type(released.__name__, (released,), {"backward": staticmethod(backward)})

    def checkpoint(self, run_function, *args):
        module.CheckpointWithoutOutputFunction = function
        try:
            return module.CheckpointWithoutOutput.checkpoint(self, run_function, *args)
        finally:
            module.CheckpointWithoutOutputFunction = released

    base = module.CheckpointWithoutOutput
    return type(base.__name__, (base,), {"checkpoint": checkpoint})
