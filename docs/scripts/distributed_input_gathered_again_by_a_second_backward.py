#!/usr/bin/env python3
"""A recheck case as a standalone script (written by recheck export-python).

distributed-input-gathered-again-by-a-second-backward (released code): a loop that calls backward twice, the graph retained, through a checkpoint that distributes its saved input: the first backward gathered the input back to its full shape in place, and the second gathers it again; gloo refuses a 2-d input (on NCCL and two ranks the view of twice the elements fails). Eager mode differentiates twice.

It rebuilds the case with torch ops, runs it eagerly and through a checkpoint function, and
asserts a property: an AssertionError with the evidence means the property fails.

    python3 THIS_SCRIPT [--checkpoint megatron|megatron-clearing|torch|torch-non-reentrant]
                        [--oracle the same choices] [--property NAME]

megatron needs megatron-core; on CPU, Megatron's CUDA RNG calls go to a stand-in generator.
Checkpoints without output are megatron-core's CheckpointWithoutOutput(fp8=None).

The case, as `recheck show` prints it:

    case: seed 5, float32 on cpu, 1 iteration
      differentiated by backward, twice (the graph retained)
      v0 = leaf [2, 3] float32 randn requires_grad
      v1 = tanh(v0)
      v2 = checkpoint(distribute=True, v1)
        | v0 = inputs
        | v1 = square(v0)
        | return v1
      return v2
"""

DEVICE = "cpu"
CHECKPOINT = "megatron"
ORACLE = "megatron"
PROPERTY = "errors-match"
PROPERTIES = ["grads-bitwise", "outputs-bitwise", "recompute-fidelity", "grads-match-eager", "hooks-match-eager", "hooks-bitwise", "module-state-matches-eager", "rng-restored", "errors-match", "no-side-effects", "flag-in-body", "stash-kept", "stash-grads", "grad-released", "discard-own-outputs", "discard-recomputed", ]
ITERATIONS = 1
CONTINUE_AFTER_ERROR = False
BACKWARD = {"call": "backward", "inputs": [], "twice": True}
WITHOUT_OUTPUT = False
USES_TRACKER = False
DISTRIBUTES = True
CPU_SEED = 11400714819323198480
TRACKER_SEED = 5
GRAD_ULP_BOUND = 64
LEAVES = [  # shape, dtype, requires_grad, values
    ([2, 3], "float32", True, [-0.0049185054376721382, -0.1052783727645874, 0.52554494142532349, 2.215179443359375, 0.27456861734390259, 0.84413355588912964]),
]
LOSS_WEIGHTS = {  # output: [(shape, values), ...], recheck's weights for each shape it takes
    0: [([2, 3], [2.0256943702697754, 0.40062794089317322, -0.084627263247966766, 0.081965059041976929, 0.6144370436668396, 1.359660267829895]), ],
}

import argparse
import math
import struct
import sys
import warnings
import weakref

import torch

ON_CUDA = DEVICE == "cuda"
# The device generator: CUDA's on a GPU; on CPU a separate generator standing in for it, which
# Megatron reaches through the shim below (recheck's own set-up, so that values match its run).
if ON_CUDA:
    torch.cuda.init()  # torch.cuda.default_generators is empty until torch.cuda has started
DEVICE_GEN = torch.cuda.default_generators[0] if ON_CUDA else torch.Generator()
if not ON_CUDA:
    torch.cuda.get_rng_state = torch.cuda.random.get_rng_state = lambda device="cuda": DEVICE_GEN.get_state()
    torch.cuda.set_rng_state = torch.cuda.random.set_rng_state = lambda s, device="cuda": DEVICE_GEN.set_state(s)
    torch.cuda.manual_seed = torch.cuda.random.manual_seed = lambda seed: DEVICE_GEN.manual_seed(seed)


# The checkpoint functions the script can call (--checkpoint, --oracle), by name: each subject's
# folder declares its own in its export.py, which the script holds after this file. `make()` gives
# a function called as checkpoint(body, distribute, *args, **options); `megatron`: it is Megatron's
# (it needs megatron-core and keeps Megatron's is-checkpointing flag).
class Exported:
    def __init__(self, make, megatron):
        self.make = make
        self.megatron = megatron


CHECKPOINTS = {}
# For the names whose functions checkpoint without output too: what makes such a checkpoint.
WITHOUT_OUTPUT_MAKERS = {}


def exported(name, megatron):
    def declare(make):
        CHECKPOINTS[name] = Exported(make, megatron)
        return make
    return declare


def exported_without_output(name):
    def declare(make):
        WITHOUT_OUTPUT_MAKERS[name] = make
        return make
    return declare


RRELU_LOWER = 1.0 / 8.0  # nn.RReLU's default lower slope, as recheck's rrelu draws
ALPHA_SATURATION = 1.7580993408473766  # nn.AlphaDropout's: SELU's scale times its alpha

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "bool": torch.bool}


def tracker():
    return need_megatron("the case forks Megatron's RNG tracker").get_cuda_rng_tracker()


def seed_all():
    torch.manual_seed(CPU_SEED)
    if megatron_random is not None:
        megatron_random.model_parallel_cuda_manual_seed(TRACKER_SEED, tp_rank=0, ep_rank=0, etp_rank=0)
        megatron_random.IS_CHECKPOINTING = False
    else:
        DEVICE_GEN.manual_seed(TRACKER_SEED)


def state_bytes(state):
    return bytes(state.cpu().tolist())


def rng_snapshot():
    snap = {"CPU generator": state_bytes(torch.get_rng_state()), "device generator": state_bytes(DEVICE_GEN.get_state())}
    if megatron_random is not None:
        t = megatron_random.get_cuda_rng_tracker()
        for name, state in t.states_.items():
            snap[f"tracker state '{name}'"] = state_bytes(state)
        # Megatron before 2026-01 keeps no current state name: compared where there is one.
        snap["tracker current state"] = getattr(t, "_current_state_name", None)
    return snap


def storage_bytes(t):
    return t.untyped_storage().nbytes() if torch.is_tensor(t) else 0


def same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.untyped_storage().nbytes() > 0


def rng_difference(a, b):
    return ", ".join(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def is_leaf(t):
    """t.is_leaf, as libtorch's C++ reads it: a view a custom Function returned, whose base was
    then changed in place, has a grad_fn (so it is no leaf) that Python refuses to hand out."""
    try:
        return t.is_leaf
    except RuntimeError:
        return False


def make_leaves():
    leaves = []
    for shape, dtype, requires_grad, values in LEAVES:
        data_type = {"int64": torch.int64, "bool": torch.bool}.get(dtype, torch.float64)
        # A tensor of its own (no _base), as recheck's leaves are: the reshape of the flat values
        # is a view, and .to() hands it back as it is where dtype and device already match.
        leaf = torch.tensor(values, dtype=data_type).reshape(shape).to(DEVICE, DTYPES[dtype]).clone()
        leaves.append(leaf.requires_grad_(requires_grad))
    return leaves


def allocated(t):
    """Whether t's storage holds every element t addresses (a discarded output's does not, and
    reading it reads freed memory)."""
    if t.numel() == 0:
        return True
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size() <= t.untyped_storage().nbytes()


class Values(list):
    """A segment's values. An op reads its operands by index, and reading a tensor whose storage
    holds none of its elements raises, as recheck's ops do (the kernels would read freed memory);
    value(i) hands a value on as it is."""

    def __getitem__(self, i):
        t = list.__getitem__(self, i)
        if torch.is_tensor(t) and not allocated(t):
            raise RuntimeError("an op reads a tensor whose storage holds none of its elements "
                               "(a discarded output not recomputed yet)")
        return t

    def value(self, i):
        return list.__getitem__(self, i)


def keep(t):
    return t.detach().clone() if torch.is_tensor(t) and allocated(t) else None


def autocast_state():
    """Whether autocast is on, and its dtype, on CPU and CUDA (torch 2.4's API, or the one before)."""
    if hasattr(torch, "get_autocast_dtype"):
        return tuple((torch.is_autocast_enabled(d), str(torch.get_autocast_dtype(d))) for d in ("cpu", "cuda"))
    return ((torch.is_autocast_cpu_enabled(), str(torch.get_autocast_cpu_dtype())),
            (torch.is_autocast_enabled(), str(torch.get_autocast_gpu_dtype())))


class Run:
    """One run of the case: the checkpoint function, and what the properties read."""

    def __init__(self, checkpoint, without_output=None):
        self.checkpoint = checkpoint
        self.without_output = without_output  # makes a checkpoint without output; None: eager mode
        self.discards = []
        self.recomputing = 0
        self.stash = {}
        self.calls = []
        self.detached = []
        self.leaves = []  # the case's leaves: what a capture op hands a body (the leaf itself)
        self.hook_calls = []  # this iteration's hook calls (Run.hook)
        self.hooked_accumulators = []  # the gradient accumulators this iteration's hooks hang on
        self.modules = {}  # each module's state (Run.state): running mean, steps, updates
        self.iteration = 0
        self.reads = []  # the flag readings of each checkpoint body call running, innermost last

    def read_flag(self):
        self.reads[-1].append(bool(getattr(megatron_random, "IS_CHECKPOINTING", False)))

    def stashed(self):
        """What each stash op keeps, as its user finds it: (site, what it is, and for a tensor
        requires_grad, is_leaf, _version, its data and its .grad)."""
        kept = {}
        for site, value in self.stash.items():
            if not torch.is_tensor(value):
                kept[site] = {"what": "None" if value is None else f"{type(value).__name__} {value!r}"}
                continue
            leaf = is_leaf(value)
            kept[site] = {"what": "a tensor", "requires_grad": value.requires_grad, "is_leaf": leaf,
                          "version": value._version, "data": keep(value),
                          "grad": keep(value.grad) if leaf else None}
        return kept

    def call_checkpoint(self, site, body, distribute, args, options=None):
        run_function, watch = self.watched(site, body, args)
        return watch(self.checkpoint(run_function, distribute, *args, **(options or {})))

    def watched(self, site, body, args):
        """The body as a checkpoint calls it, recording each call (forward's, then each
        recomputation's) for the properties; and what watches the call's outputs."""
        started, calls, returned, states, flags = [0], [], [False], [], []
        # The caller's own tensors: a checkpoint that hands them to its recomputation as they are
        # (PyTorch's non-reentrant one) made no recomputation input of them.
        callers = [weakref.ref(a) for a in args if torch.is_tensor(a)]
        self.calls.append({"site": site, "iteration": self.iteration, "calls": calls, "autocast": states,
                           "flags": flags, "started": started})

        def run_function(*inputs):
            recompute = started[0] > 0
            started[0] += 1
            state = autocast_state()
            if recompute:
                for i, t in enumerate(inputs):
                    if torch.is_tensor(t) and not any(c() is t for c in callers):
                        self.detached.append((f"{site} input {i}", weakref.ref(t), returned))
                self.recomputing += 1
            flags.append([])
            self.reads.append(flags[-1])
            try:
                outputs = body(self, *inputs)
            finally:
                self.reads.pop()
                if recompute:
                    self.recomputing -= 1
            calls.append([keep(o) for o in outputs])
            states.append(state)
            return outputs

        def watch(outputs):
            outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
            # Whether this call's backward returned: after an error, the inputs of a backward the
            # error cut short were never collected, so the change has nothing to clear there.
            nodes = {o.grad_fn for o in outputs if torch.is_tensor(o) and o.grad_fn is not None}
            for node in nodes:
                node.register_hook(lambda grad_inputs, grad_outputs: returned.__setitem__(0, True))
            return outputs

        return run_function, watch

    def call_without_output(self, site, body, args, kept, first):
        """A checkpoint without output (Megatron's CheckpointWithoutOutput): its outputs; what
        discards them is kept in `kept` under `first`, the value number of its first output.
        Eager mode runs the body as it is."""
        run_function, watch = self.watched(site, body, args)
        started = self.calls[-1]["started"]
        handle = self.without_output() if self.without_output else None
        outputs = watch(handle.checkpoint(run_function, *args) if handle else run_function(*args))
        kept[first] = {"site": site, "handle": handle, "outputs": outputs, "started": started,
                       "forward": [keep(o) for o in outputs], "forward_bytes": [storage_bytes(o) for o in outputs]}
        return outputs

    def discard(self, site, named, hook, values):
        """A discard op: frees the outputs of the checkpoints `named` and registers their
        recomputation on hook's gradient; records which of the caller's tensors (`values`, every
        value of the segment so far) it changed besides those outputs and views of them."""
        outputs = [o for k in named for o in k["outputs"] if torch.is_tensor(o)]
        first = min(next(i for i, x in enumerate(values) if x is k["outputs"][0]) for k in named)
        held = [(i, t, storage_bytes(t), keep(t)) for i, t in enumerate(values)
                if torch.is_tensor(t) and not (i >= first and any(same_storage(t, o) for o in outputs))]
        hook_calls = [0]
        if hook.requires_grad:
            hook.register_hook(lambda grad: hook_calls.__setitem__(0, hook_calls[0] + 1))
        handles = [k["handle"] for k in named if k["handle"] is not None]
        for handle in handles:
            handle.discard_output_and_register_recompute(hook)
        touched = []
        for i, t, nbytes, data in held:
            if storage_bytes(t) != nbytes:
                touched.append(f"v{i}: storage {nbytes} -> {storage_bytes(t)} bytes")
            elif bitwise_difference(keep(t), data) is not None:
                touched.append(f"v{i}: data changed")
        for k in named:
            freed = any(storage_bytes(o) < b for o, b in zip(k["outputs"], k["forward_bytes"]) if torch.is_tensor(o))
            self.discards.append({"site": site, "checkpoint": k["site"], "touched": touched, "freed": freed,
                                  "kept": k, "hook_calls": hook_calls})

    def finish_discards(self):
        """The iteration's discards, completed: recomputations, and the outputs as the caller
        holds them once the iteration ended."""
        records = []
        for d in self.discards:
            k = d["kept"]
            records.append({"site": d["site"], "checkpoint": d["checkpoint"], "touched": d["touched"],
                            "freed": d["freed"], "hook_reached": d["hook_calls"][0] > 0,
                            "recomputations": max(0, k["started"][0] - 1), "forward": k["forward"],
                            "forward_bytes": k["forward_bytes"], "after": [keep(o) for o in k["outputs"]],
                            "after_bytes": [storage_bytes(o) for o in k["outputs"]]})
        self.discards = []
        return records

    def random(self, x, fn, source, state, p):
        """A random op's value, as recheck computes it (core/tensor_ops.cpp): the same draws from
        the same generator, the same ops in the same order."""
        def from_source(draw):
            if source == "cpu":
                return draw(torch.default_generator, "cpu")
            if source == "device":
                return draw(DEVICE_GEN, x.device)
            with tracker().fork(state):
                return draw(DEVICE_GEN, x.device)

        def sampled(shape, fill):
            def draw(generator, where):
                t = torch.empty(shape, dtype=torch.float32, device=where)
                fill(t, generator, where)
                return t.to(x.device, x.dtype)
            return from_source(draw)

        def keep_mask(shape):
            return sampled(shape, lambda t, g, where: t.bernoulli_(1.0 - p, generator=g))

        def gathered(draw):
            index = from_source(lambda g, where: draw(g, where).to(x.device))
            return x.reshape(-1).index_select(0, index).reshape(x.shape)

        if fn == "dropout":
            return x * keep_mask(x.shape) / (1.0 - p)
        if fn == "feature-dropout":
            rows = [x.shape[0]] + [1] * (x.dim() - 1) if x.dim() > 0 else []
            return x * keep_mask(rows) / (1.0 - p)
        if fn == "alpha-dropout":
            keep = keep_mask(x.shape)
            a = 1.0 / math.sqrt((ALPHA_SATURATION * ALPHA_SATURATION * p + 1.0) * (1.0 - p))
            return x * (keep * a) + ((keep - 1.0) * (ALPHA_SATURATION * a) + ALPHA_SATURATION * a * p)
        if fn == "noise":
            return x + sampled(x.shape, lambda t, g, where: t.normal_(0.0, 1.0, generator=g)) * p
        if fn == "uniform-noise":
            return x + (sampled(x.shape, lambda t, g, where: t.uniform_(0.0, 1.0, generator=g)) - 0.5) * p
        if fn == "gumbel":
            return x + sampled(x.shape, lambda t, g, where: t.exponential_(1.0, generator=g).log_().neg_()) * p
        if fn == "bernoulli":
            probabilities = torch.sigmoid(x.detach().to(torch.float32) / p)
            sample = sampled(x.shape, lambda t, g, where: t.bernoulli_(probabilities.to(where), generator=g))
            soft = torch.sigmoid(x / p)
            return (sample - soft.detach()) + soft
        if fn == "rrelu":
            # nn.RReLU in training mode: the kernel draws each negative element's slope, in x's
            # dtype, into the noise its backward multiplies by. nn.RReLU hands it an uninitialized
            # tensor; zeroed here as in recheck, so that a gradient reading it unfilled
            # (pytorch#193671) is the same wrong value in every run.
            noise = torch.zeros_like(x)
            return from_source(lambda g, where: torch.ops.aten.rrelu_with_noise(x, noise, RRELU_LOWER, p, True, g))
        if fn == "multinomial":
            weights = torch.softmax(torch.nan_to_num(x.detach().reshape(-1).to(torch.float32) / p), 0)
            return gathered(lambda g, where: torch.multinomial(weights.to(where), weights.numel(), True, generator=g))
        if fn == "randperm":
            return gathered(lambda g, where: torch.randperm(x.numel(), generator=g, dtype=torch.int64, device=where))
        raise ValueError("unknown random fn " + fn)

    def hook(self, site, x, kind, scale):
        """recheck's hook op: a hook on x's gradient where x requires grad, recording each call
        (site, whether hung in a recomputation, the gradient) and, with a scale other than 1,
        returning the gradient times scale; with kind "accumulator", a post hook on leaf x's
        gradient accumulator (DDP's), recording x.grad after each accumulation; with kind
        "post-accumulate", x.register_post_accumulate_grad_hook, the same. x again. An earlier
        iteration's hook records nothing."""
        if kind not in ("tensor", "accumulator", "post-accumulate"):
            raise ValueError("unknown hook kind " + kind)
        if not x.requires_grad:
            return x
        calls, recomputation = self.hook_calls, self.recomputing > 0
        if kind == "accumulator":
            if not x.is_leaf:
                return x
            with torch.enable_grad():
                accumulator = x.view_as(x).grad_fn.next_functions[0][0]

            def accumulated(grad_inputs, grad_outputs):
                if calls is self.hook_calls:
                    calls.append((site, recomputation, keep(x.grad)))
            accumulator.register_hook(accumulated)
            self.hooked_accumulators.append(accumulator)  # alive until the iteration ends, as DDP keeps them
            return x
        if kind == "post-accumulate":
            if not x.is_leaf:
                return x

            def post_accumulated(parameter):  # the parameter comes as the argument: no cycle through x
                if calls is self.hook_calls:
                    calls.append((site, recomputation, keep(parameter.grad)))
            x.register_post_accumulate_grad_hook(post_accumulated)
            return x

        def hook(grad):
            if calls is not self.hook_calls:
                return None
            calls.append((site, recomputation, keep(grad)))
            return None if scale == 1.0 or grad is None else grad * scale
        x.register_hook(hook)
        return x

    def state(self, module, x, fn):
        """recheck's state op: module `module`'s running mean (momentum 0.1, in float64) or step
        counter, read and written each time the op runs, a recomputation included."""
        mean, steps, updates = self.modules.get(module, (0.0, 0, 0))
        if fn == "running-mean":
            drawn = x.detach().double().mean().item() if x.numel() else 0.0
            self.modules[module] = ((1 - 0.1) * mean + 0.1 * drawn, steps, updates + 1)
            return x
        if fn == "count":
            self.modules[module] = (mean, steps + 1, updates + 1)
            return x * (1.0 + ((steps + 1) % 4) / 4.0)
        raise ValueError("unknown state fn " + fn)

    def raise_op(self, x, when):
        if when == "recompute" and self.recomputing == 0:
            return x
        if when == "first-iteration" and self.iteration != 0:
            return x
        torch.mm(x.reshape(1, -1), torch.zeros(x.numel() + 1, 1, dtype=x.dtype, device=x.device))
        return x  # not reached: the shapes never match


def differentiate(loss, leaves):
    """The training loop's differentiation of the loss (recheck's Case::backward): backward, or
    torch.autograd.grad, whose gradients the loop keeps (returned: leaf number to gradient, the
    two calls' added where it asks twice, the graph retained for the second)."""
    inputs = [leaves[n] for n in BACKWARD["inputs"]]
    returned = {}
    calls = 2 if BACKWARD["twice"] else 1
    for call in range(calls):
        retain = call + 1 < calls
        if BACKWARD["call"] == "backward":
            torch.autograd.backward(loss, retain_graph=retain, inputs=inputs or None)
            continue
        for n, grad in zip(BACKWARD["inputs"], torch.autograd.grad(loss, inputs, retain_graph=retain, allow_unused=True)):
            if grad is not None:
                returned[n] = grad if n not in returned else returned[n] + grad
    return returned


def run_case(checkpoint, without_output=None):
    seed_all()
    leaves = make_leaves()
    run = Run(checkpoint, without_output)
    run.leaves = leaves
    seen = {"iterations": [], "error": None, "calls": run.calls}
    for iteration in range(ITERATIONS):
        run.iteration = iteration
        run.detached = []
        run.hook_calls = []
        record = {}
        returned = {}  # what torch.autograd.grad gave, where the loop asks it
        phase, start = "forward", rng_snapshot()
        try:
            outputs = seg_0(run, *leaves)
            loss = None
            record["outputs"] = [keep(o) for o in outputs]
            for i, o in enumerate(outputs):
                if not torch.is_tensor(o) or not o.requires_grad:
                    continue
                # recheck's loss weights, by the shape the output has; ones where recheck made none of it
                weights = [w for w in LOSS_WEIGHTS.get(i, []) if tuple(w[0]) == tuple(o.shape)]
                weight = torch.tensor(weights[0][1], dtype=torch.float64).reshape(weights[0][0]) \
                    if weights else torch.ones(o.shape, dtype=torch.float64)
                term = (o * weight.to(o.device, o.dtype)).sum()
                loss = term if loss is None else loss + term
            record["loss"] = keep(loss)
            phase, start = "backward", rng_snapshot()
            if loss is not None:
                returned = differentiate(loss, leaves)
            del outputs, loss
        except Exception as error:  # what the case raised is an observation, as in recheck
            # The state the error left is recorded as an iteration's is: no outputs, and only
            # the recomputation inputs of calls whose backward returned.
            record = {"error": {"iteration": iteration, "phase": phase, "type": type(error).__name__,
                                "message": str(error), "rng": rng_snapshot(), "rng_at_start": start}}
            seen["error"] = seen["error"] or record["error"]
            outputs = loss = None  # the graph goes with them, as it does in recheck
        record["discards"] = run.finish_discards()
        record["hook_calls"], run.hook_calls = run.hook_calls, None
        run.hooked_accumulators = []
        record["modules"] = dict(run.modules)
        record["stashed"] = run.stashed()
        record["leaf_grads"] = [keep(returned[k] if k in returned else leaf.grad) for k, leaf in enumerate(leaves)]
        returned = None
        record["leaf_data"] = [keep(leaf) for leaf in leaves]
        record["rng"] = rng_snapshot()
        record["flag"] = bool(getattr(megatron_random, "IS_CHECKPOINTING", False))
        record["autocast"] = autocast_state()
        record["holding_grad"] = [site for site, ref, returned in run.detached
                                  if ref() is not None and ref().grad is not None and ("error" not in record or returned[0])]
        seen["iterations"].append(record)
        if "error" in record and not CONTINUE_AFTER_ERROR:
            break
    return seen


def main():
    names = list(CHECKPOINTS)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", choices=names, default=CHECKPOINT)
    parser.add_argument("--oracle", choices=names, default=ORACLE,
                        help="what grads-bitwise, stash-kept, stash-grads and hooks-bitwise compare with")
    parser.add_argument("--property", default=PROPERTY,
                        help="a property, or several separated by commas: " + ", ".join(PROPERTIES))
    args = parser.parse_args()
    wanted = args.property.split(",")
    for name in wanted:
        if name not in PROPERTIES:
            parser.error(f"--property: no property named {name!r} (known: {', '.join(PROPERTIES)})")
    without_output = " or ".join(WITHOUT_OUTPUT_MAKERS)
    if WITHOUT_OUTPUT and args.checkpoint not in WITHOUT_OUTPUT_MAKERS:
        parser.error(f"the case holds checkpoints without output (Megatron's CheckpointWithoutOutput), which "
                     f"{args.checkpoint} has not: use --checkpoint {without_output}")
    megatron = CHECKPOINTS[args.checkpoint].megatron
    if "flag-in-body" in wanted and not megatron:
        parser.error(f"--property flag-in-body reads Megatron's is-checkpointing flag, which {args.checkpoint} does "
                     "not set: use a Megatron checkpoint (" + ", ".join(n for n in names if CHECKPOINTS[n].megatron) + ")")
    against_oracle = {"grads-bitwise", "stash-kept", "stash-grads", "hooks-bitwise"} & set(wanted)
    if WITHOUT_OUTPUT and against_oracle and args.oracle not in WITHOUT_OUTPUT_MAKERS:
        parser.error(f"--oracle {args.oracle}: the case holds checkpoints without output, which {args.oracle} has not")
    if megatron or USES_TRACKER or (against_oracle and CHECKPOINTS[args.oracle].megatron):
        need_megatron("Megatron's checkpoint, its RNG tracker, or a comparison with it")

    def run_with(name):
        return run_case(CHECKPOINTS[name].make(), WITHOUT_OUTPUT_MAKERS[name]() if WITHOUT_OUTPUT else None)

    eager = run_case(lambda f, distribute, *a, **options: f(*a))
    subject = run_with(args.checkpoint)
    oracle = run_with(args.oracle) if against_oracle else None
    failures = []
    for name in wanted:
        evidence = check(name, subject, eager, oracle)
        print(f"torch {torch.__version__}, checkpoint {args.checkpoint}, {name}: "
              + ("holds" if evidence is None else "FAILS: " + evidence))
        if evidence is not None:
            failures.append(f"{name}: {evidence}")
    assert not failures, "; ".join(failures)


# The exported script's property checks: each property export-python can assert, as recheck
# checks it (properties/*.cpp), over the records run_case makes (properties/export_runtime.py,
# which the script holds before this file). tests/python/export_agreement_test.cpp holds the two
# to the same verdicts.


def bitwise_difference(a, b):
    if (a is None) != (b is None):
        return f"defined: {'a tensor' if a is not None else 'None'} vs {'a tensor' if b is not None else 'None'}"
    if a is None:
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    if a.dtype.is_floating_point:
        # by their bits: -0.0 is not 0.0 here, and a NaN is itself
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        same_a, same_b = a.contiguous().view(bits).reshape(-1), b.contiguous().view(bits).reshape(-1)
    else:
        same_a, same_b = a.reshape(-1), b.reshape(-1)
    if torch.equal(same_a, same_b):
        return None
    i = int((same_a != same_b).nonzero()[0])
    return f"element {i}: {a.reshape(-1)[i].item()!r} vs {b.reshape(-1)[i].item()!r}"


def ulp_difference(a, b, bound):
    """recheck's grads-match-eager comparison: bitwise, or within `bound` units in the last place
    at the reference's scale (its largest magnitude)."""
    d = bitwise_difference(a, b)
    if d is None or a is None or b is None or not a.dtype.is_floating_point or a.dtype != b.dtype \
            or a.shape != b.shape:
        return d
    x, y = a.double().reshape(-1), b.double().reshape(-1)
    scale = y.abs().max().item() if y.numel() else 0.0
    s = torch.tensor(scale, dtype=torch.float32 if a.dtype != torch.float64 else torch.float64)
    unit = (torch.nextafter(s, torch.tensor(float("inf"), dtype=s.dtype)) - s).item()
    if a.dtype == torch.bfloat16:
        unit *= 65536.0
    for i in range(x.numel()):
        u, v = x[i].item(), y[i].item()
        if u != u and v != v:
            continue
        if not (u != u or v != v) and abs(u - v) <= bound * unit:
            continue
        return f"element {i}: {u!r} vs {v!r}, beyond {bound} ulp of scale {scale!r}"
    return None


def check(prop, subject, eager, oracle):
    """The evidence that `prop` fails for `subject` (a run), or None when it holds."""
    common = lambda a, b: zip(range(min(len(a["iterations"]), len(b["iterations"]))), a["iterations"], b["iterations"])
    error_of = lambda r: None if "error" not in r else (r["error"]["phase"], r["error"]["type"], r["error"]["message"])
    # Both completed the iteration, or both raised the same error in the same phase of it (then
    # the state the error left is compared); where they part, errors-match judges.
    comparable = lambda s, e: error_of(s) == error_of(e)
    completed = lambda s, e: "error" not in s and "error" not in e
    at = lambda i, s: f"iteration {i}" + (" (after its error)" if "error" in s else "")
    if prop == "outputs-bitwise":
        for i, s, e in common(subject, eager):
            if not completed(s, e):
                continue
            for o, (x, y) in enumerate(zip(s["outputs"], e["outputs"])):
                if (d := bitwise_difference(x, y)):
                    return f"iteration {i}, output {o}: {d}"
            if (d := bitwise_difference(s["loss"], e["loss"])):
                return f"iteration {i}, loss: {d}"
    elif prop in ("grads-bitwise", "grads-match-eager"):
        reference = oracle if prop == "grads-bitwise" else eager
        for i, s, e in common(subject, reference):
            # After an error in backward, what the engine had accumulated depends on the order it
            # ran the graph, which checkpointing changes: compared with the oracle only.
            if not comparable(s, e) or (prop == "grads-match-eager" and "error" in s and s["error"]["phase"] != "forward"):
                continue
            for leaf, (x, y) in enumerate(zip(s["leaf_grads"], e["leaf_grads"])):
                d = bitwise_difference(x, y) if prop == "grads-bitwise" else ulp_difference(x, y, GRAD_ULP_BOUND)
                if d:
                    return f"{at(i, s)}, leaf v{leaf} .grad: {d}"
    elif prop == "hooks-match-eager":
        for i, s, e in common(subject, eager):
            if not comparable(s, e) or ("error" in s and s["error"]["phase"] != "forward"):
                continue
            by_site = lambda calls: {site: [c for c in calls if c[0] == site] for site, _, _ in calls}
            mine, theirs = by_site(s["hook_calls"]), by_site(e["hook_calls"])
            for site in list(theirs) + [x for x in mine if x not in theirs]:
                a, b = mine.get(site, []), theirs.get(site, [])
                where = f"{at(i, s)}, the hook at {site}"
                if len(a) != len(b):
                    return f"{where}: called {'more' if len(a) > len(b) else 'fewer'} times than eager mode's " \
                        f"({len(a)} vs {len(b)})"
                for k, (x, y) in enumerate(zip(a, b)):
                    if (d := ulp_difference(x[2], y[2], GRAD_ULP_BOUND)):
                        return f"{where}, call {k}, its gradient: {d}"
    elif prop == "hooks-bitwise":
        for i, s, o in common(subject, oracle):
            if not comparable(s, o):
                continue
            a, b = s["hook_calls"], o["hook_calls"]
            for k in range(max(len(a), len(b))):
                where = f"{at(i, s)}, hook call {k}"
                if k >= len(a) or k >= len(b):
                    return f"{where}: one {'more' if k < len(a) else 'fewer'} than the oracle's"
                if a[k][0] != b[k][0]:
                    return f"{where}: the hook at {a[k][0]}, the oracle's at {b[k][0]}"
                if (d := bitwise_difference(a[k][2], b[k][2])):
                    return f"{where} (the hook at {a[k][0]}), its gradient: {d}"
    elif prop == "module-state-matches-eager":
        for i, s, e in common(subject, eager):
            if not comparable(s, e) or ("error" in s and s["error"]["phase"] != "forward"):
                continue
            for module in sorted(set(s["modules"]) | set(e["modules"])):
                a, b = s["modules"].get(module, (0.0, 0, 0)), e["modules"].get(module, (0.0, 0, 0))
                # the running mean by its bits, as recheck compares it
                if a[1:] == b[1:] and struct.pack("<d", a[0]) == struct.pack("<d", b[0]):
                    continue
                state = f"its step counter {a[1]} vs {b[1]}, its running mean {a[0]!r} vs {b[0]!r}"
                if a[2] != b[2]:
                    return f"{at(i, s)}, module {module}: updated {'more' if a[2] > b[2] else 'fewer'} times than " \
                        f"eager mode's ({a[2]} vs {b[2]}): {state}"
                return f"{at(i, s)}, module {module}: updated as often as eager mode's, to another state: {state}"
    elif prop == "recompute-fidelity":
        for call in subject["calls"]:
            for k, recomputed in enumerate(call["calls"][1:], 1):
                if call["autocast"][k] != call["autocast"][0]:
                    return (f"{call['site']} at iteration {call['iteration']}, recomputation vs forward: autocast "
                            f"(cpu, cuda) {call['autocast'][k]} vs {call['autocast'][0]}")
                for o, (x, y) in enumerate(zip(recomputed, call["calls"][0])):
                    if (d := bitwise_difference(x, y)):
                        return f"{call['site']} at iteration {call['iteration']}, recomputed output {o} vs forward: {d}"
    elif prop == "rng-restored":
        for i, s, e in common(subject, eager):
            if completed(s, e) and (d := rng_difference(s["rng"], e["rng"])):
                return f"after iteration {i}: differs from eager: {d}"
    elif prop == "errors-match":
        describe = lambda x: "no error" if x is None else \
            f"{x['type']} in iteration {x['iteration']} {x['phase']}: {x['message']}"
        key = lambda x: None if x is None else (x["type"], x["message"], x["iteration"])
        # The first error a run raised in iteration i or later: where the runs part, each side
        # is named by its next error.
        next_error = lambda run, i: next((r["error"] for r in run["iterations"][i:] if "error" in r), None)
        for i, sr, er in common(subject, eager):
            if "error" not in sr and "error" not in er:
                continue
            s, e = sr.get("error") or next_error(subject, i), er.get("error") or next_error(eager, i)
            if s is not None and s["phase"] == "backward" and (d := rng_difference(s["rng"], s["rng_at_start"])):
                return f"{describe(s)}; RNG not restored when the error reached the caller: {d}"
            if key(s) != key(e):
                return f"{describe(s)} | eager: {describe(e)}"
            if (d := rng_difference(s["rng"], e["rng"])):
                return f"RNG after the error in iteration {i} differs from eager: {d}"
    elif prop == "no-side-effects":
        for i, s, e in common(subject, eager):
            if not comparable(s, e):
                continue
            for leaf, (x, y) in enumerate(zip(s["leaf_data"], e["leaf_data"])):
                if (d := bitwise_difference(x, y)):
                    return f"{at(i, s)}, leaf v{leaf} data: {d}"
            if s["flag"] != e["flag"]:
                return f"after {at(i, s)}: is-checkpointing flag {s['flag']}, eager {e['flag']}"
            if s["autocast"] != e["autocast"]:
                return f"after {at(i, s)}: autocast (cpu, cuda) left {s['autocast']}, eager {e['autocast']}"
    elif prop == "flag-in-body":
        for call in subject["calls"]:
            for k, reads in enumerate(call["flags"]):
                for n, flag in enumerate(reads):
                    if flag:
                        continue
                    returned = n + 1 == len(reads) and k < len(call["calls"])
                    point = f"once {call['site']}.body returned" if returned else f"before {call['site']}.body.ops[{n}]"
                    return (f"{call['site']} at iteration {call['iteration']}, "
                            f"{'forward' if k == 0 else f'recomputation {k}'}: is_checkpointing() read False {point}")
    elif prop in ("stash-kept", "stash-grads"):
        for i, s, o in common(subject, oracle):
            if not comparable(s, o):
                continue
            for site in list(s["stashed"]) + [x for x in o["stashed"] if x not in s["stashed"]]:
                a, b = s["stashed"].get(site), o["stashed"].get(site)
                where = f"after {at(i, s)}, the stash at {site}"
                if a is None or b is None:
                    return f"{where}: kept in {'the oracle' if a is None else 'this'} run only"
                if prop == "stash-grads":
                    if a["what"] == b["what"] == "a tensor" and (d := bitwise_difference(a["grad"], b["grad"])):
                        return f"{where} .grad: {d}"
                    continue
                for key in ("what", "requires_grad", "is_leaf"):
                    if a.get(key) != b.get(key):
                        return f"{where}: {key} {a.get(key)}, the oracle's {b.get(key)}"
                if a["what"] == "a tensor" and (d := bitwise_difference(a["data"], b["data"])):
                    return f"{where} data: {d}"
                if a.get("version") != b.get("version"):
                    return f"{where}: _version {a.get('version')}, the oracle's {b.get('version')}"
    elif prop == "discard-own-outputs":
        for i, s in enumerate(subject["iterations"]):
            for d in s["discards"]:
                if d["touched"]:
                    return f"{at(i, s)}, discard {d['site']} of {d['checkpoint']}: it changed the caller's " \
                        + ", ".join(d["touched"])
    elif prop == "discard-recomputed":
        for i, s in enumerate(subject["iterations"]):
            for d in s["discards"] if "error" not in s else ():
                where = f"iteration {i}, outputs of {d['checkpoint']} discarded at {d['site']}"
                if not d["freed"]:
                    continue
                if not d["hook_reached"]:
                    if d["recomputations"]:
                        return f"{where}: recomputed {d['recomputations']} times, though backward never reached its hook"
                    continue
                if d["recomputations"] != 1:
                    return f"{where}: recomputed {d['recomputations']} times, not once"
                for o, (x, y) in enumerate(zip(d["after"], d["forward"])):
                    if d["after_bytes"][o] != d["forward_bytes"][o] or (x is None) != (y is None):
                        return (f"{where}, output {o}: its storage holds {d['after_bytes'][o]} bytes after the "
                                f"iteration, {d['forward_bytes'][o]} after forward")
                    if (diff := bitwise_difference(x, y)):
                        return f"{where}, output {o}: its data after the iteration differs from forward's: {diff}"
    elif prop == "grad-released":
        for i, s in enumerate(subject["iterations"]):
            if s["holding_grad"]:
                return f"after {at(i, s)}: recomputation inputs still holding .grad: {', '.join(s['holding_grad'])}"
    return None



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



# How a script `recheck export-python` writes makes this subject's checkpoints without output:
# Megatron's CheckpointWithoutOutput as its layers make it without FP8 (fp8=None), for
# --checkpoint megatron, and with the clearing change in its backward for megatron-clearing
# (python/pr_wrapper.py). The script holds this file after its runtime
# (properties/export_runtime.py: `exported_without_output`).


@exported_without_output("megatron")
def megatron_without_output():
    made = need_megatron("Megatron's CheckpointWithoutOutput").CheckpointWithoutOutput
    return lambda: made(fp8=None)


@exported_without_output("megatron-clearing")
def megatron_without_output_clearing():
    made = clearing_without_output(need_megatron("Megatron's CheckpointWithoutOutput"))
    return lambda: made(fp8=None)



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


def seg_1(run, *inputs):
    v = Values(inputs)
    run.read_flag()
    v.append(torch.mul(v[0], v[0]))
    run.read_flag()
    return (v.value(1), )


def seg_0(run, *inputs):
    v = Values(inputs)
    v.append(torch.tanh(v[0]))
    v.extend(run.call_checkpoint("root.ops[1]", seg_1, True, [v.value(1), ]))
    return (v.value(2), )


if __name__ == "__main__":
    main()
