# megatron-core for an exported script (written after properties/export_runtime.py, in the same
# namespace): imported only when the case needs it, Megatron's CUDA RNG calls sent to the stand-in
# device generator on CPU, and a tensor-parallel group of one rank for checkpoints that distribute.

megatron_random = None  # megatron.core.tensor_parallel.random, once imported


def need_megatron(what):
    global megatron_random
    if megatron_random is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # megatron-core warns about missing Apex and TE on import
                import megatron.core.tensor_parallel.random as module
        except ImportError as error:
            sys.exit(f"this script needs megatron-core ({what}): pip install megatron-core ({error})")
        if not ON_CUDA:
            module._get_cuda_rng_state = lambda device="cuda", clone=False, graph_safe=False: DEVICE_GEN.get_state()
            module._set_cuda_rng_state = lambda s, device=-1, graph_safe=False: DEVICE_GEN.set_state(s)
        if DISTRIBUTES:
            start_one_rank_group()
        megatron_random = module
    return megatron_random


def start_one_rank_group():
    """A checkpoint that distributes its saved activations splits its first argument over
    Megatron's tensor-parallel group and gathers it back: a group of one rank here (gloo, a store
    in this process), as recheck's own runs start, so the chunk is the whole tensor and what runs
    is Megatron's code path."""
    import torch.distributed as dist
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core import parallel_state
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    if not ON_CUDA:
        torch.cuda.current_device = lambda: torch.device("cpu")  # where Megatron makes its buffers
