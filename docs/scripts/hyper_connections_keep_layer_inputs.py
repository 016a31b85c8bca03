#!/usr/bin/env python3
"""Megatron-LM's hyper-connection layers keep each layer's recomputation input, and its .grad,
alive after the training step (docs/memory.md, "Megatron's own GPT model"). Standalone: torch
and a Megatron-LM source tree with residual streams (its dev branch, checked at d48bd6be0a).

  python hyper_connections_keep_layer_inputs.py MEGATRON_TREE [--device cpu|cuda]

Builds a 2-layer GPTModel with hyper-connections, 4 residual streams and full recompute, trains
one step, and lists the recomputation inputs still alive after it, with their bytes. With the
plain layer (no hyper-connections) none is. Exit 1 when an input is still alive (the retention
shown), 0 when none is, 2 when the tree cannot build the model.

Why: HyperConnectionTransformerLayer keeps the tensor it fed its pre-MLP norm on the layer
(mlp_norm_manager.tensor) and never resets it, as the plain layer does after its MLP. The
recomputation makes that tensor last, with a graph; the graph keeps the AccumulateGrad of the
recomputation's detached input, which keeps the input and the .grad backward left on it.
"""
import argparse
import gc
import logging
import os
import sys
import weakref

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")

import torch  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tree")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--plain", action="store_true", help="the plain layer, for comparison")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.tree))
    if args.device == "cpu":
        # Megatron draws its dropout states from "the CUDA generator" and allocates on "the
        # current device": both pointed at the CPU, before Megatron is imported.
        generator = torch.Generator()
        torch.cuda.get_rng_state = torch.cuda.random.get_rng_state = lambda device="cuda": generator.get_state()
        torch.cuda.set_rng_state = torch.cuda.random.set_rng_state = lambda s, device="cuda": generator.set_state(s)
        torch.cuda.manual_seed = lambda seed: generator.manual_seed(seed)
        torch.cuda.current_device = lambda: torch.device("cpu")
    try:
        import megatron.core.tensor_parallel.random as megatron_random
        from megatron.core import parallel_state
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.core.transformer.transformer_config import TransformerConfig
    except Exception as error:  # noqa: BLE001
        print(f"the tree's GPT model cannot be imported: {type(error).__name__}: {error}")
        return 2
    if args.device == "cpu":
        logging.getLogger(megatron_random.__name__).setLevel(logging.ERROR)  # its note at every fork on CPU
        megatron_random._get_cuda_rng_state = lambda *a, **k: generator.get_state()
        megatron_random._set_cuda_rng_state = lambda state, *a, **k: generator.set_state(state)
    device = torch.device(args.device)
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    megatron_random.model_parallel_cuda_manual_seed(1)

    # Every recomputation input, watched without keeping it alive.
    detached = []
    detach = megatron_random.detach_variable

    def watching_detach(inputs):
        outputs = detach(inputs)
        detached.extend(weakref.ref(t) for t in outputs if isinstance(t, torch.Tensor))
        return outputs

    megatron_random.detach_variable = watching_detach

    streams = {} if args.plain else {"enable_hyper_connections": True, "num_residual_streams": 4}
    try:
        config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True,
                                   recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1,
                                   **streams)
        spec = get_gpt_layer_local_spec(**({} if args.plain else {"enable_hyper_connection": True}))
        model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=128, max_sequence_length=32,
                         position_embedding_type="rope").to(device)
    except Exception as error:  # noqa: BLE001
        print(f"the tree cannot build the model: {type(error).__name__}: {error}")
        return 2
    tokens = torch.randint(0, 128, (1, 33), generator=torch.Generator().manual_seed(0)).to(device)
    positions = torch.arange(32, device=device).unsqueeze(0)
    mask = torch.triu(torch.ones(1, 1, 32, 32, dtype=torch.bool, device=device), diagonal=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = model(tokens[:, :-1], positions, mask, labels=tokens[:, 1:]).float().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    del loss
    gc.collect()

    alive = [t for t in (ref() for ref in detached) if t is not None]
    print(f"{len(alive)} of {len(detached)} recomputation inputs alive after the step")
    for t in alive:
        grad = t.grad
        print(f"  {list(t.shape)}: {t.untyped_storage().nbytes()} bytes, .grad "
              f"{grad.untyped_storage().nbytes() if grad is not None else 0} bytes")
    for i, layer in enumerate(model.decoder.layers):
        kept = getattr(getattr(layer, "mlp_norm_manager", None), "tensor", None)
        if kept is not None:
            print(f"  model.decoder.layers.{i}.mlp_norm_manager.tensor is still set: {list(kept.shape)}")
    return 1 if alive else 0


if __name__ == "__main__":
    sys.exit(main())
