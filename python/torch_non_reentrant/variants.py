"""The subject torch-checkpoint-non-reentrant: PyTorch's torch.utils.checkpoint.checkpoint with
use_reentrant=False, as released with the options recheck's generator draws for each call, the
same reached by other means (equivalent rewrites), and plausible mistakes in how a non-reentrant
checkpoint is set up (mutants). Each is a function called as `function(body, *args, **options)`;
recheck's Python bridge runs it as the module recheck_torch_non_reentrant (embedded in recheck,
from this file), and the subject is declared beside it (subject.cpp). docs/adding-a-subject.md
walks through it.
"""
import contextlib
import functools

import torch
import torch.utils.checkpoint as checkpointing

# How the bridge calls these: function(body, *args, **options), no distribute flag
# (python/bridge.py, call).
CHECKPOINT_STYLE = "function"

# The options a call takes, drawn per checkpoint by recheck's generator: each option's values as
# the case spells them, the function's default first. preserve_rng_state=False is drawn only for a
# body that draws no random numbers (in all it nests): elsewhere the documentation promises no
# more than different random numbers in the recomputation.
CALL_OPTIONS = {
    "preserve_rng_state": {"values": ["True", "False"], "only_without_rng": ["False"]},
    "early_stop": {"values": ["True", "False"]},
    "determinism_check": {"values": ["default", "none"]},
    "policy": {"values": ["none", "save_matmuls"]},
}

# The policy save_matmuls: the outputs of matrix products saved in forward, the rest recomputed.
_MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default)


def _save_matmuls(ctx, op, *args, **kwargs):
    return checkpointing.CheckpointPolicy.MUST_SAVE if op in _MATMULS else checkpointing.CheckpointPolicy.PREFER_RECOMPUTE


def _keywords(options):
    """torch.utils.checkpoint.checkpoint's keyword arguments for the options a case drew."""
    keywords = {
        "use_reentrant": False,
        "preserve_rng_state": options.get("preserve_rng_state", "True") == "True",
        "early_stop": options.get("early_stop", "True") == "True",
        "determinism_check": options.get("determinism_check", "default"),
    }
    if options.get("policy", "none") == "save_matmuls":
        keywords["context_fn"] = functools.partial(checkpointing.create_selective_checkpoint_contexts, _save_matmuls)
    return keywords


def released(body, *args, **options):
    """The function as released, called with the options the case drew: held against eager mode."""
    return checkpointing.checkpoint(body, *args, **_keywords(options))


# Equivalent rewrites: the same options reached another way, which must compute the same.

def early_stop_through_context_manager(body, *args, **options):
    """early_stop set by the global set_checkpoint_early_stop context manager, which overrides
    the keyword, instead of by the keyword."""
    keywords = _keywords(options)
    early_stop = keywords.pop("early_stop")
    with checkpointing.set_checkpoint_early_stop(early_stop):
        return checkpointing.checkpoint(body, *args, **keywords)


def policy_as_op_list(body, *args, **options):
    """The selective policy given to create_selective_checkpoint_contexts as the list of ops to
    save rather than as a policy function."""
    keywords = _keywords(options)
    if "context_fn" in keywords:
        keywords["context_fn"] = functools.partial(checkpointing.create_selective_checkpoint_contexts, list(_MATMULS))
    return checkpointing.checkpoint(body, *args, **keywords)


# Mutants: each one plausible mistake in setting up a non-reentrant checkpoint.

def rng_not_preserved(body, *args, **options):
    """preserve_rng_state=False always ("faster"): the recomputation draws from wherever the
    generators are when backward runs, not from forward's states."""
    keywords = _keywords(options)
    keywords["preserve_rng_state"] = False
    return checkpointing.checkpoint(body, *args, **keywords)


def inputs_detached(body, *args, **options):
    """The tensor arguments detached before checkpointing ("the checkpoint recomputes them
    anyway"), requires_grad kept: no gradient reaches what they were computed from."""
    detached = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    return checkpointing.checkpoint(body, *detached, **_keywords(options))


def _recompute_without_grad():
    return contextlib.nullcontext(), torch.no_grad()


def recompute_without_grad(body, *args, **options):
    """A context_fn whose recomputation context turns grad mode off ("recomputing needs no
    graph"): the recomputed ops save nothing for backward."""
    keywords = _keywords(options)
    keywords["context_fn"] = _recompute_without_grad
    return checkpointing.checkpoint(body, *args, **keywords)


_last_outputs = []


def keeps_recomputed(body, *args, **options):
    """What the body returned last (the recomputation's outputs, once backward ran) kept alive
    in a module global, "to inspect after a failure": nothing changes but what stays allocated
    after backward."""

    def keeping(*inputs):
        outputs = body(*inputs)
        _last_outputs[:] = [outputs]
        return outputs

    return checkpointing.checkpoint(keeping, *args, **_keywords(options))
