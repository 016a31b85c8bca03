"""Megatron's checkpoint entry points given by name, as `python:FILE.py:ATTR` or
`python:MODULE:ATTR`, each called the way Megatron's layers call it. Embedded into recheck and run in
the bridge's module after python/bridge.py and python/loading.py (one namespace): resolve() asks
entry_point() first.

    CheckpointFunction                 autograd Function: apply(body, distribute, *args) (bridge.py)
    checkpoint                         the wrapper: checkpoint(body, distribute, *args) (bridge.py)
    CheckpointWithoutOutput            a checkpoint whose outputs the caller discards: made as
                                       Megatron's layers make it without FP8 (fp8=None)
    CheckpointWithoutOutputManager,    the same, every discard of a case made by one manager:
    MHCCheckpointManager               one hook recomputing its checkpoints in forward order
    NAME+cudagraphable-rng             NAME with the tracker Megatron makes for CUDA graphs
                                       (model_parallel_cuda_manual_seed(use_cudagraphable_rng=True))

A checkpoint without output comes back as a module of the subject's shape (CHECKPOINT_STYLE
"without_output", python/megatron_without_output/variants.py): the cases' plain checkpoints run the
same file's CheckpointFunction, so that a base revision and a head revision each run their own.
"""

# What an attribute name may carry after the function's name: how the run seeds the tracker.
CUDAGRAPHABLE_RNG = "+cudagraphable-rng"

# The modules whose tracker recheck seeds as Megatron seeds it for CUDA graphs (tracker_seed).
_cudagraphable_rng_modules = set()


def split_entry_point(attr):
    """(the attribute, whether its tracker is the CUDA-graph one)."""
    if attr.endswith(CUDAGRAPHABLE_RNG):
        return attr[: -len(CUDAGRAPHABLE_RNG)], True
    return attr, False


def seeds_cudagraphable_rng(module):
    return module.__name__ in _cudagraphable_rng_modules


def use_cudagraphable_rng(module, attr_as_given):
    """Marks the module's tracker as seeded for CUDA graphs, or says why it cannot be."""
    import inspect

    seed = getattr(module, "model_parallel_cuda_manual_seed", None)
    if seed is None or "use_cudagraphable_rng" not in inspect.signature(seed).parameters:
        raise CodeImportError(f"{module.__name__}:{attr_as_given}: this Megatron's model_parallel_cuda_manual_seed "
                              f"takes no use_cudagraphable_rng (Megatron-LM since 2024; megatron-core 0.10 or later)")
    _cudagraphable_rng_modules.add(module.__name__)


# On CPU, the tracker Megatron makes for CUDA graphs, as CUDA's generators behave: a state is a
# generator object, and graphsafe_set_state makes the device generator *share* the object it is
# given (its draws advance that object), graphsafe_get_state hands out the object it shares, and
# clone_state a copy. Stood in for by CPU torch.Generator objects over recheck's stand-in device
# generator: the object the device generator shares is brought up to date with the stand-in's
# draws whenever anything reads or replaces it (_sync), which is when a difference could be seen.
_shared = [None]  # the generator object the device generator shares now; None: its own, unmade


def _sync():
    if _shared[0] is not None:
        _shared[0].set_state(_recheck.device_get_state())


def _generator_with(state):
    generator = torch.Generator()
    generator.set_state(state)
    return generator


def graph_safe_get(clone):
    _sync()
    if clone:
        return _generator_with(_recheck.device_get_state())
    if _shared[0] is None:
        _shared[0] = _generator_with(_recheck.device_get_state())
    return _shared[0]


def graph_safe_set(generator):
    _sync()
    _shared[0] = generator
    _recheck.device_set_state(generator.get_state())


def state_tensor(state):
    """A tracker state as bytes: a generator object's (CUDA-graph trackers) read up to date."""
    if isinstance(state, torch.Generator):
        _sync()
        return state.get_state()
    return state


def forget_shared_generator():
    """Each seeding starts from the device generator's own state (tracker_seed)."""
    _shared[0] = None


def _is_without_output_class(value):
    return isinstance(value, type) and hasattr(value, "discard_output_and_register_recompute")


def _is_manager_class(value):
    return isinstance(value, type) and hasattr(value, "discard_all_outputs_and_register_unified_recompute")


def entry_point(module, attr):
    """A module of the subject's shape for a CheckpointWithoutOutput or a manager class of
    Megatron's `module`, or None for any other attribute (called as bridge.py's call says)."""
    import inspect
    import types

    value = getattr(module, attr)
    if not (_is_without_output_class(value) or _is_manager_class(value)):
        return None
    without_output = value if _is_without_output_class(value) else getattr(module, "CheckpointWithoutOutput", None)
    if without_output is None:
        raise CodeImportError(f"{module.__name__}:{attr} is a checkpoint manager in a module with no "
                              f"CheckpointWithoutOutput")
    takes_fp8 = "fp8" in inspect.signature(without_output.__init__).parameters
    adapter = types.ModuleType(f"recheck_entry_point_{attr}")
    adapter.__file__ = getattr(module, "__file__", None)
    adapter.CHECKPOINT_STYLE = "without_output"
    adapter.MEGATRON_MODULE = module

    def make():
        # fp8=None: TransformerConfig's default; Megatron's fp8=False takes Transformer Engine's path.
        return without_output(fp8=None) if takes_fp8 else without_output()

    make.__name__ = attr
    setattr(adapter, attr, make)
    # Arguments that are not tensors: saved apart from the tensors since Megatron-LM 7cdba422b8.
    adapter.takes_non_tensor_arguments = lambda: hasattr(module, "_save_args_to_ctx")
    adapter.checkpoint = lambda body, distribute, *args: module.CheckpointFunction.apply(body, distribute, *args)
    if _is_manager_class(value):
        def discard_together(objects, hook):
            manager = value()
            for one in objects:
                one.ckpt_manager = manager
                manager.add_checkpoint(one)
            manager.discard_all_outputs_and_register_unified_recompute(hook)

        adapter.discard_together = discard_together
    return adapter
