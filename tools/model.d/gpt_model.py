"""tools/model's measurement: megatron-core's GPTModel trained per variant from the same weights,
data and seeds, on CPU or on a CUDA device (tools/model says what it prints)."""
import contextlib
import difflib
import gc
import importlib.util
import json
import logging
import os
import pickle
import sys
import tempfile
import warnings
import weakref

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found"

import holders  # noqa: E402
import snapshots  # noqa: E402

SEED, LR = 1234, 0.05
# The line the clearing change adds its loop after, in CheckpointFunction.backward.
COLLECT = "grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached_inputs)"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class Refused(Exception):
    """The tree, the configuration or the device cannot be measured: one line saying why."""


DEVICE_GENERATOR = torch.Generator()
DEVICE = torch.device("cpu")


def load_megatron(device):
    """Imports Megatron for `device`. On CPU, Megatron's CUDA RNG calls go to a CPU generator and
    "the current device" is the CPU (Megatron allocates its rotary frequencies and its global
    memory buffer there), before Megatron loads; on CUDA, Megatron runs as it does on a GPU."""
    global DEVICE, tensor_parallel, megatron_random, parallel_state, RotaryEmbedding, GPTModel
    global get_gpt_layer_local_spec, TransformerConfig
    if device == "cuda":
        if not torch.cuda.is_available():
            raise Refused(f"--device cuda: torch {torch.__version__} sees no CUDA device here")
        # Bitwise verdicts need the same bits from the same inputs: deterministic kernels, and
        # cuBLAS's fixed workspace (read when its handle is made, after this).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        DEVICE = torch.device("cuda", torch.cuda.current_device())
    else:
        torch.cuda.get_rng_state = torch.cuda.random.get_rng_state = lambda device="cuda": DEVICE_GENERATOR.get_state()
        torch.cuda.set_rng_state = torch.cuda.random.set_rng_state = \
            lambda state, device="cuda": DEVICE_GENERATOR.set_state(state)
        torch.cuda.manual_seed = lambda seed: DEVICE_GENERATOR.manual_seed(seed)
        torch.cuda.current_device = lambda: torch.device("cpu")
    try:
        import megatron.core.tensor_parallel as tensor_parallel
        import megatron.core.tensor_parallel.random as megatron_random
        from megatron.core import parallel_state
        from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.core.transformer.transformer_config import TransformerConfig
    except Exception as error:  # noqa: BLE001  (an old or broken tree: say which, in one line, exit 2)
        print(f"tools/model: Megatron's GPT model cannot be imported here: {type(error).__name__}: {error}",
              file=sys.stderr)
        sys.exit(2)
    if device == "cpu":
        # On CPU, dropout inside a tracker fork draws from the CPU generator, which Megatron warns
        # about at every fork; the recomputation restores that generator too.
        logging.getLogger(megatron_random.__name__).setLevel(logging.ERROR)
        megatron_random._get_cuda_rng_state = \
            lambda device="cuda", clone=False, graph_safe=False: DEVICE_GENERATOR.get_state()
        megatron_random._set_cuda_rng_state = \
            lambda state, device=-1, graph_safe=False: DEVICE_GENERATOR.set_state(state)


def held():
    """The bytes held now: on CPU, what live tensors hold (each storage once); on CUDA, what the
    caching allocator has handed out."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated(DEVICE)
    return holders.held_bytes()


DETACHED = []  # (label, weak reference) of every recomputation input of the iteration running
RETAINED = []  # --retain: what "a module caching its input" keeps


def head_source(base_text):
    """The base's random.py with the clearing change written in after the line that collects."""
    lines = base_text.split("\n")
    hits = [i for i, line in enumerate(lines) if line.strip() == COLLECT]
    if len(hits) != 1:
        raise Refused(f"the base's random.py has {len(hits)} lines collecting the detached inputs' .grad "
                      "(expected one): pass the head's file with --head")
    indent = lines[hits[0]][: len(lines[hits[0]]) - len(lines[hits[0]].lstrip())]
    lines[hits[0] + 1:hits[0] + 1] = [indent + "for inp in detached_inputs:",
                                      indent + "    if isinstance(inp, torch.Tensor):",
                                      indent + "        inp.grad = None"]
    return "\n".join(lines)


def load_checkpoint_function(tag, text, folder, retain):
    """CheckpointFunction from `text` (a random.py), with every other name of its module pointed at
    the base module's (one RNG tracker, one flag), and detach_variable recording what it makes."""
    path = os.path.join(folder, f"random_{tag}.py")
    with open(path, "w") as out:
        out.write(text)
    spec = importlib.util.spec_from_file_location(f"megatron.core.tensor_parallel._recheck_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001
        raise Refused(f"{tag}'s random.py cannot be loaded: {type(error).__name__}: {error}")
    if not hasattr(module, "CheckpointFunction"):
        raise Refused(f"{tag}'s random.py has no CheckpointFunction")
    for name, value in vars(megatron_random).items():
        if not name.startswith("__") and name != "CheckpointFunction":
            setattr(module, name, value)

    def recording_detach_variable(inputs):
        outputs = megatron_random.detach_variable(inputs)
        call = 1 + len({label.split()[0] for label, _ in DETACHED})
        for i, t in enumerate(outputs):
            if isinstance(t, torch.Tensor):
                DETACHED.append((f"recomputation#{call} input {i} {list(t.shape)}", weakref.ref(t)))
                if retain:
                    RETAINED.append(t)
        return outputs

    module.detach_variable = recording_detach_variable
    return lambda function, distribute, *args: module.CheckpointFunction.apply(function, distribute, *args)


def build(args, recompute):
    try:
        config = TransformerConfig(num_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
                                   use_cpu_initialization=True, params_dtype=DTYPES[args.dtype],
                                   bf16=args.dtype == "bfloat16",
                                   recompute_granularity="full" if recompute else None,
                                   recompute_method="uniform" if recompute else None,
                                   recompute_num_layers=1 if recompute else None, **args.config)
        torch.manual_seed(SEED)
        megatron_random.model_parallel_cuda_manual_seed(SEED)
        # Residual streams (a dev tree) take the hyper-connection layer in the spec too.
        spec = get_gpt_layer_local_spec(**({"enable_hyper_connection": True}
                                           if args.config.get("enable_hyper_connections") else {}))
        return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=args.vocab,
                        max_sequence_length=args.seq, position_embedding_type="rope").to(DEVICE)
    except Exception as error:  # noqa: BLE001  (Megatron refuses the configuration: say why)
        raise Refused(f"Megatron refuses the configuration: {type(error).__name__}: {error}")


def batches(args):
    generator = torch.Generator().manual_seed(SEED + 7)
    mask = torch.triu(torch.ones(1, 1, args.seq, args.seq, dtype=torch.bool), diagonal=1)
    positions = torch.arange(args.seq).unsqueeze(0)
    made = []
    for _ in range(args.iterations):
        tokens = torch.randint(0, args.vocab, (1, args.seq + 1), generator=generator)
        made.append(tuple(t.to(DEVICE) for t in (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous(),
                                                  positions, mask)))
    return made


INTEGERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t):
    """A tensor's dtype, shape and bytes, kept as Python bytes (not a tensor the count would see)."""
    if t is None:
        return None
    return (str(t.dtype), tuple(t.shape),
            t.detach().contiguous().view(INTEGERS[t.element_size()]).cpu().numpy().tobytes())


def peak_of(prof):
    """The most bytes the profiler's memory events held above the window's start."""
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"), key=lambda e: e.start_ns())
    running = peak = 0
    for event in events:
        running += event.nbytes()
        peak = max(peak, running)
    return peak


def peak_since(before, start, prof):
    """The most held during the iteration, above the variant's start: on CUDA the allocator's
    peak; on CPU the iteration's start plus the profiler's highest point above it."""
    if DEVICE.type == "cuda":
        return torch.cuda.max_memory_allocated(DEVICE) - before
    return start - before + peak_of(prof)


def run_variant(args, name, checkpoint, initial, data, snapshot_to=None):
    """Trains the iterations of `data` with `checkpoint` (None: no recompute), and records each;
    with `snapshot_to`, writes the last iteration's allocations there (snapshots.py)."""
    parallel_state.destroy_global_memory_buffer()  # filled by the first attention call: each
    parallel_state._set_global_memory_buffer()     # variant starts from an empty one
    before = held()
    model = build(args, recompute=checkpoint is not None)
    model.load_state_dict(initial, strict=True)
    original = tensor_parallel.checkpoint
    if checkpoint is not None:
        tensor_parallel.checkpoint = checkpoint  # Megatron's blocks look it up on the package per call
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    names = holders.root_names(model)
    torch.manual_seed(SEED + 1)
    megatron_random.model_parallel_cuda_manual_seed(SEED + 1)
    records = []
    try:
        for i, (tokens, labels, positions, mask) in enumerate(data):
            DETACHED.clear()
            RETAINED.clear()
            start = held()
            last = i + 1 == len(data)
            if DEVICE.type == "cuda":
                torch.cuda.reset_peak_memory_stats(DEVICE)
                if snapshot_to and last:
                    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
            window = (profile(activities=[ProfilerActivity.CPU], profile_memory=True) if DEVICE.type == "cpu"
                      else contextlib.nullcontext())
            with window as prof:
                with record_function(snapshots.FORWARD):
                    loss = model(tokens, positions, mask, labels=labels).float().mean()
                with record_function(snapshots.BACKWARD):
                    loss.backward()
                record = {"loss": loss.item(), "loss_bits": bits(loss),
                          "grads": {n: bits(p.grad) for n, p in model.named_parameters()}}
                del loss
                with record_function(snapshots.STEP):
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            record["peak"] = peak_since(before, start, prof)
            record["params"] = {n: bits(p) for n, p in model.named_parameters()}
            record["floor"] = held() - before
            if snapshot_to and last:
                if DEVICE.type == "cuda":
                    taken = torch.cuda.memory._snapshot()
                    torch.cuda.memory._record_memory_history(enabled=None)
                else:
                    taken = snapshots.from_profiler(prof, name, start - before)
                snapshots.write(taken, snapshot_to)
            del prof
            record["inputs"] = len(DETACHED)
            record["alive"] = []
            for label, ref in DETACHED:
                t = ref()
                if t is None:
                    continue
                grad = t._grad
                record["alive"].append({"input": label, "storage_bytes": t.untyped_storage().nbytes(),
                                        "grad_bytes": grad.untyped_storage().nbytes() if grad is not None else 0,
                                        "held_by": holders.who_holds(t, names)})
                del t, grad
            # What only a reference cycle keeps goes at the collector's next run, whenever that is.
            gc.collect()
            record["floor_after_collect"] = held() - before
            record["alive_after_collect"] = sum(ref() is not None for _, ref in DETACHED)
            records.append(record)
    finally:
        tensor_parallel.checkpoint = original
        RETAINED.clear()
    del model, optimizer
    RotaryEmbedding.forward.cache_clear()  # a class-level cache keeps each model's rotary module
    gc.collect()
    return records


def measure(args):
    load_megatron(args.device)
    torch.set_num_threads(1)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    megatron_random.model_parallel_cuda_manual_seed(SEED)
    with open(megatron_random.__file__) as base_file:
        base_text = base_file.read()
    if args.head:
        with open(args.head) as head_file:
            head_text = head_file.read()
    else:
        head_text = head_source(base_text)
    folder = tempfile.TemporaryDirectory(prefix="recheck-model-")
    base = load_checkpoint_function("base", base_text, folder.name, args.retain)
    head = load_checkpoint_function("head", head_text, folder.name, args.retain)
    initial = {k: v.clone() for k, v in build(args, recompute=False).state_dict().items() if v is not None}
    data = batches(args)
    gc.collect()
    gc.disable()  # the count of live tensors must not move with the collector's timing
    try:
        # A first recomputed iteration makes what Megatron and torch keep once made (caches,
        # lazily built buffers): not one variant's bytes.
        try:
            run_variant(args, "warm-up", base, initial, data[:1])
            runs = {name: run_variant(args, name, checkpoint, initial, data,
                                      f"{args.snapshot}-{name}.pickle" if args.snapshot else None)
                    for name, checkpoint in (("no-recompute", None), ("base", base), ("head", head))}
        except Refused:
            raise
        except torch.OutOfMemoryError as error:
            raise Refused(f"the configuration does not fit in {DEVICE}'s memory: {str(error).splitlines()[0]}")
        except Exception as error:  # noqa: BLE001  (Megatron accepted the configuration, then failed)
            raise Refused(f"Megatron cannot train the configuration: {type(error).__name__}: {error}")
    finally:
        gc.enable()
    torch.distributed.destroy_process_group()
    parallel_state.destroy_model_parallel()
    edit = [line for line in difflib.unified_diff(base_text.split("\n"), head_text.split("\n"), n=0, lineterm="")][2:]
    return summarize(args, runs, edit)


def summarize(args, runs, edit):
    def differing(x, y, key):
        return sorted(n for n in x[key] if x[key][n] != y[key][n])

    iterations = []
    head_as_base = True
    for i in range(args.iterations):
        base, head, eager = runs["base"][i], runs["head"][i], runs["no-recompute"][i]
        row = {"iteration": i, "loss": {name: runs[name][i]["loss"] for name in runs}}
        for name, other in (("head_vs_base", base), ("head_vs_no_recompute", eager)):
            row[name] = {"loss_equal": head["loss_bits"] == other["loss_bits"],
                         "grads_differing": differing(head, other, "grads"),
                         "params_differing": differing(head, other, "params")}
        row["base_vs_no_recompute"] = {"loss_equal": base["loss_bits"] == eager["loss_bits"],
                                       "grads_differing": differing(base, eager, "grads"),
                                       "params_differing": differing(base, eager, "params")}
        row["floor"] = {name: runs[name][i]["floor"] for name in runs}
        row["floor_after_collect"] = {name: runs[name][i]["floor_after_collect"] for name in runs}
        row["alive_after_collect"] = {name: runs[name][i]["alive_after_collect"] for name in runs}
        row["peak"] = {name: runs[name][i]["peak"] for name in runs}
        row["freed"] = base["floor"] - head["floor"]
        row["predicted"] = sum(a["grad_bytes"] for a in base["alive"])
        row["recomputation_inputs"] = base["inputs"]
        row["alive"] = {"base": base["alive"], "head": head["alive"]}
        same = row["head_vs_base"]
        head_as_base = head_as_base and same["loss_equal"] and not same["grads_differing"] and \
            not same["params_differing"] and head["floor"] <= base["floor"]
        iterations.append(row)
    return {"torch": torch.__version__, "megatron_core": getattr(sys.modules["megatron.core"], "__version__", "unknown"),
            "random_py": megatron_random.__file__, "head": args.head or "the base's file with the clearing change",
            "edit": edit, "retain": args.retain,
            "device": str(DEVICE), "dtype": args.dtype,
            "device_name": torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "CPU",
            "snapshots": [f"{args.snapshot}-{name}.pickle" for name in runs] if args.snapshot else [],
            "config": dict({k: getattr(args, k) for k in ("layers", "hidden", "heads", "seq", "vocab", "iterations")},
                           settings=args.config),
            "parameters": len(runs["base"][0]["grads"]), "iterations": iterations, "head_as_base": head_as_base}


def print_report(report):
    c = report["config"]
    print(f"GPTModel, megatron-core {report['megatron_core']}, torch {report['torch']}, {report['device_name']}, "
          f"{report['dtype']}: "
          f"{c['layers']} layers, hidden {c['hidden']}, {c['heads']} heads, sequence {c['seq']}, vocabulary "
          f"{c['vocab']}, full uniform recompute, SGD, {c['iterations']} iterations"
          + "".join(f", {k}={v!r}" for k, v in c["settings"].items())
          + (", recomputation inputs retained (--retain)" if report["retain"] else ""))
    print(f"base: {report['random_py']}\nhead: {report['head']}" +
          ("".join("\n  " + line for line in report["edit"]) if report["edit"] else "\n  (the same text)"))
    print()
    print("iter  loss (base)           head=base  head=no-recompute  base=no-recompute  floor no-rec   floor base"
          "   floor head  freed  predicted   peak base   peak head")

    def verdict(same):
        wrong = len(same["grads_differing"]) + len(same["params_differing"])
        return "bitwise" if same["loss_equal"] and not wrong else f"{wrong} differ" + ("" if same["loss_equal"] else ", loss")

    for row in report["iterations"]:
        print(f"{row['iteration']:>4}  {row['loss']['base']!r:<20}  {verdict(row['head_vs_base']):>9}  "
              f"{verdict(row['head_vs_no_recompute']):>17}  {verdict(row['base_vs_no_recompute']):>17}  "
              f"{row['floor']['no-recompute']:>12}  {row['floor']['base']:>11}  {row['floor']['head']:>11}  "
              f"{row['freed']:>5}  {row['predicted']:>9}  "
              f"{row['peak']['base']:>10}  {row['peak']['head']:>10}")
    counted = ("what the caching allocator has handed out" if report["device"].startswith("cuda")
               else "what live tensors hold")
    print(f"(bytes; {report['parameters']} parameters compared; the floor is {counted} after the "
          "step, parameters included; freed = floor base - floor head; predicted = the .grad bytes of the base's "
          "live recomputation inputs)")
    last = report["iterations"][-1]
    beyond = {side: last["floor"][side] - last["floor"]["no-recompute"] for side in ("base", "head")}
    print(f"At the last floor, recompute holds {beyond['base']} bytes beyond no recompute in the base and "
          f"{beyond['head']} in the head: the head frees "
          + ("all of it" if beyond["head"] <= 0 else "none of it" if beyond["head"] == beyond["base"] else "part of it")
          + (" (nothing to free)" if beyond["base"] <= 0 else "") + ".")
    for row in report["iterations"]:
        for side in ("base", "head"):
            alive = row["alive"][side]
            print(f"\niteration {row['iteration']}, {side}: {len(alive)} of {row['recomputation_inputs']} "
                  "recomputation inputs alive after the step" + (": nothing retained" if not alive else
                  f" ({row['alive_after_collect'][side]} after gc.collect(), floor then "
                  f"{row['floor_after_collect'][side]} bytes)"))
            for a in alive:
                print(f"  {a['input']}: storage {a['storage_bytes']} bytes, .grad {a['grad_bytes']} bytes, held by")
                for path in a["held_by"]:
                    print(f"    {path}")
    for path in report["snapshots"]:
        print(f"\nsnapshot: {path} (python -m torch.cuda._memory_viz trace_plot {path} -o "
              f"{path[:-len('.pickle')]}.html)", end="")
    if report["snapshots"]:
        print()
    print("\nOK: the head computes the base's bits and holds no more" if report["head_as_base"] else
          "\nFAIL: the head's losses, gradients or parameters differ from the base's, or its floor is higher")


def write_json(report, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as out:
        json.dump(report, out, indent=1)
    os.replace(tmp, path)
