# How a script `recheck export-python` writes calls this subject's functions (--checkpoint and
# --oracle): megatron, Megatron's CheckpointFunction; megatron-clearing, the same with the change
# (python/pr_wrapper.py); torch, PyTorch's reentrant checkpoint (the bridge's torch-py). The
# script holds this file after its runtime (properties/export_runtime.py: `exported`).


@exported("megatron", megatron=True)
def megatron_checkpoint_function():
    function = need_megatron("--checkpoint megatron").CheckpointFunction
    return lambda f, distribute, *args: function.apply(f, distribute, *args)


@exported("megatron-clearing", megatron=True)
def megatron_checkpoint_function_clearing():
    module = need_megatron("--checkpoint megatron-clearing")
    function = clearing(module.CheckpointFunction, module)
    return lambda f, distribute, *args: function.apply(f, distribute, *args)


@exported("torch", megatron=False)
def torch_reentrant_checkpoint():
    import torch.utils.checkpoint
    return lambda f, distribute, *args: torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=True)
