# How a script `recheck export-python` writes calls this subject's function: --checkpoint
# torch-non-reentrant, PyTorch's torch.utils.checkpoint.checkpoint with use_reentrant=False and
# the case's call options as variants.py passes them. The script holds this file after its
# runtime (properties/export_runtime.py: `exported`).


def non_reentrant_keywords(options):
    """torch.utils.checkpoint.checkpoint's keywords for a case's call options."""
    import functools
    import torch.utils.checkpoint as checkpointing
    keywords = {"use_reentrant": False,
                "preserve_rng_state": options.get("preserve_rng_state", "True") == "True",
                "early_stop": options.get("early_stop", "True") == "True",
                "determinism_check": options.get("determinism_check", "default")}
    if options.get("policy", "none") == "save_matmuls":
        saved = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default)
        keywords["context_fn"] = functools.partial(checkpointing.create_selective_checkpoint_contexts, list(saved))
    return keywords


@exported("torch-non-reentrant", megatron=False)
def torch_non_reentrant_checkpoint():
    import torch.utils.checkpoint
    return lambda f, distribute, *args, **options: torch.utils.checkpoint.checkpoint(
        f, *args, **non_reentrant_keywords(options))
