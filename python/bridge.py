import contextlib
import importlib
import logging
import warnings

import torch
import _recheck


class _Counted(logging.Handler):
    """Megatron's log records, counted by recheck instead of printed (core/logged.h): cases draw
    the CPU generator inside tracker forks on purpose, and Megatron warns at every one ("CPU RNG
    state changed within GPU RNG context"), hundreds of lines a run. Each run summarizes them
    once, at its end."""

    def emit(self, record):
        _recheck.count_logged(f"{record.name} {record.levelname}: {record.getMessage()}")


def _count_warning(message, category, filename, lineno, file=None, line=None):
    import os

    _recheck.count_logged(f"{category.__name__} ({os.path.basename(filename)}:{lineno}): {message}")


_counted_loggers = set()


def count_logs_of(package):
    """Counts the records of the logger named after a top-level package (and of its children,
    which Megatron's getLogger(__name__) makes) instead of letting them print. Megatron's is
    counted from the start; the code under another top-level name (a file outside any package
    is its own top level, recheck_file_N) gets its own before it is imported."""
    if package in _counted_loggers:
        return
    logger = logging.getLogger(package)
    logger.addHandler(_Counted())
    logger.propagate = False
    _counted_loggers.add(package)


def _count_unraisable(unraisable):
    """An exception Python ignores (raised in a finalizer: PyTorch's non-reentrant checkpoint
    pops its saved-tensor hooks when a generator left suspended by an error is collected, and
    can trip an internal assert there), counted like a log record instead of printed with its
    traceback, the object named without its address."""
    where = getattr(unraisable.object, "__qualname__", type(unraisable.object).__name__)
    message = str(unraisable.exc_value).strip().splitlines()
    _recheck.count_logged(f"exception Python ignored in {where}: {unraisable.exc_type.__name__}: "
                          f"{message[0] if message else ''}")


def _count_what_python_logs():
    import sys

    count_logs_of("megatron")
    # Every warning a case's Python code raises is counted, not only the first from each place.
    warnings.showwarning = _count_warning
    warnings.simplefilter("always")
    sys.unraisablehook = _count_unraisable


_count_what_python_logs()


_original_cuda = {}


def use_cpu_device_shim(enabled):
    """On CPU, torch.cuda's RNG calls (and Megatron's own helpers, patched per module) reach
    recheck's stand-in device generator; on a GPU they are left alone."""
    targets = [(torch.cuda, "get_rng_state"), (torch.cuda, "set_rng_state"), (torch.cuda, "manual_seed"),
               (torch.cuda, "manual_seed_all"), (torch.cuda.random, "get_rng_state"),
               (torch.cuda.random, "set_rng_state"), (torch.cuda.random, "manual_seed"),
               (torch.cuda.random, "manual_seed_all"), (torch.cuda, "current_device")]
    if not _original_cuda:
        for owner, name in targets:
            _original_cuda[(owner, name)] = getattr(owner, name)
    shim = {
        "get_rng_state": lambda device="cuda": _recheck.device_get_state(),
        "set_rng_state": lambda new_state, device="cuda": _recheck.device_set_state(new_state),
        "manual_seed": lambda seed: _recheck.device_manual_seed(int(seed)),
        "manual_seed_all": lambda seed: _recheck.device_manual_seed(int(seed)),
        # Megatron's split and gather make their buffers on torch.cuda.current_device().
        "current_device": lambda: torch.device("cpu"),
    }
    for owner, name in targets:
        setattr(owner, name, shim[name] if enabled else _original_cuda[(owner, name)])


# Megatron's own device RNG helpers, each replaced on CPU by one that reaches the stand-in.
# Megatron before d41666d199 (2025-02-05, megatron-core 0.11) has _set_cuda_rng_state only, and
# reads the state with torch.cuda's (use_cpu_device_shim). Its setter queues the change with
# torch.cuda._lazy_call, which without a GPU never runs: left unshimmed, no fork would restore
# the device state and no recomputation would draw the forward's numbers.
# graph_safe: the tracker Megatron makes for CUDA graphs, whose states are generator objects
# (python/megatron_entry_points.py stands them in).
_MEGATRON_RNG_SHIMS = {
    "_get_cuda_rng_state": lambda device="cuda", clone=False, graph_safe=False: (
        graph_safe_get(clone) if graph_safe else _recheck.device_get_state()),
    "_set_cuda_rng_state": lambda new_state, device=-1, graph_safe=False: (
        graph_safe_set(new_state) if graph_safe else _recheck.device_set_state(new_state)),
}
_original_module = {}


def use_megatron_shim(module, enabled):
    """Megatron's _get_cuda_rng_state / _set_cuda_rng_state (those the module has), on CPU, go to
    the stand-in."""
    for name, shim in _MEGATRON_RNG_SHIMS.items():
        if not hasattr(module, name):
            continue
        key = (module.__name__, name)
        _original_module.setdefault(key, getattr(module, name))
        setattr(module, name, shim if enabled else _original_module[key])


def resolve(module_name, attr):
    """The variant's code: (module, function, calling style, whether it has Megatron's tracker, its
    logical name, whether it can distribute saved activations). Raises, before any case, when the
    module cannot be imported (describe_import_failure) or its tracker cannot be read
    (check_tracker)."""
    style = "torch" if module_name == "torch.utils.checkpoint" else "megatron"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # megatron-core warns about missing Apex and TE on import
            if module_name.endswith(".py"):
                module = load_file(module_name)
            else:
                if style == "megatron":
                    count_logs_of(module_name.split(".")[0])
                module = importlib.import_module(module_name)
    except CodeImportError:
        raise
    except Exception as error:
        code_folders = [] if module_name.endswith(".py") else _folders_of_package(module_name.split(".")[0])
        raise CodeImportError(describe_import_failure(module_name, error, code_folders)) from error
    attr_as_given = attr
    attr, call = split_convention(attr)
    attr, cudagraphable_rng = split_entry_point(attr)
    function = attribute(module, attr)
    if function is None:
        raise AttributeError(f"module {module_name} has no attribute {attr}")
    if call is not None:
        # Called as its caller says (python/conventions.py), tried once on a trivial body first.
        caller = calling_convention(call)
        try_convention(function, caller, attr, call)
        logical = logical_name(module, module_name) if module_name.endswith(".py") else module_name
        return module, (lambda body, distribute, args, options: caller(function, body, distribute, args, options)), \
            "convention", False, logical, False
    if cudagraphable_rng:
        use_cudagraphable_rng(module, attr_as_given)
    # Megatron's classes given by name (python/megatron_entry_points.py): CheckpointWithoutOutput
    # and its managers, as a module of a subject's shape.
    if style == "megatron":
        module = entry_point(module, attr) or module
    # A module declares another calling style itself: "function", called as
    # function(body, *args, **options) (a subject's variants, python/torch_non_reentrant/variants.py),
    # or "without_output": ATTR() makes a checkpoint without output (WithoutOutput).
    style = getattr(module, "CHECKPOINT_STYLE", style)
    function = attribute(module, attr)
    code = None
    if style == "without_output":
        function = WithoutOutput(module, function)
        code = getattr(module, "CODE", None)
        # The Megatron module the variants run (imported now): its RNG helpers, tracker and flag
        # are the run's.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                count_logs_of("megatron")
                module = module.MEGATRON_MODULE
        except Exception as error:
            raise CodeImportError(describe_import_failure("megatron.core.tensor_parallel.random", error,
                                                          _folders_of_package("megatron"))) from error
        # A variant that needs what this Megatron lacks says so before any case: its own
        # cannot_run(), else its module's.
        refusal = (getattr(function.make, "cannot_run", None) or getattr(function.module, "cannot_run", lambda: None))()
        if refusal:
            raise CodeImportError(f"{module_name}:{attr}: {refusal}")
    has_tracker = hasattr(module, "get_cuda_rng_tracker") and hasattr(module, "model_parallel_cuda_manual_seed")
    if has_tracker:
        check_tracker(module)
    # The code's name, whatever file it was loaded from: two revisions of megatron-core's
    # random.py (a base and a head) are the same code, whose allocations recheck compares. The
    # package a file is loaded into does not depend on the working folder (package_of).
    logical = logical_name(module, module_name) if module_name.endswith(".py") else module_name
    return module, function, style, has_tracker, code or logical, style == "megatron" and distributes(module)



def provenance(module):
    """Where a variant's code came from: its module's file, the version of each installed
    distribution that provides the package (which may not be where the file is: a source tree on
    PYTHONPATH, or a wheel installed with --target in front of the venv's own), the
    git commit of a checkout the file sits in (and whether the file differs from it), and the
    versions of torch and Python. Pairs of strings."""
    import importlib.metadata
    import os
    import subprocess
    import sys

    pairs = []
    path = os.path.abspath(getattr(module, "__file__", "") or "")
    pairs.append(("module file", path or "(none)"))
    declared = package_version(module)
    if declared:
        pairs.append(("package", declared))
    top = module.__name__.split(".")[0]
    # Every installation of the distributions that provide the package, once each: a wheel
    # installed with --target first on PYTHONPATH and the venv's own are two.
    roots_seen = set()
    for dist_name in dict.fromkeys(importlib.metadata.packages_distributions().get(top, [])):
        for dist in importlib.metadata.distributions(name=dist_name):
            root = os.path.abspath(str(dist.locate_file("")))
            if root in roots_seen:
                continue
            roots_seen.add(root)
            where = "" if path.startswith(root + os.sep) else ", not where the module file is"
            pairs.append((dist_name, f"{dist.version} installed{where}"))
    folder = os.path.dirname(path) if path else ""
    if folder:
        try:
            commit = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True,
                                    timeout=10)
            if commit.returncode == 0:
                changed = subprocess.run(["git", "-C", folder, "status", "--porcelain", "--", path],
                                         capture_output=True, text=True, timeout=10).stdout.strip()
                pairs.append(("git", commit.stdout.strip()[:12] + (" with the file changed" if changed else "")))
        except (OSError, subprocess.SubprocessError):
            pass
    pairs.append(("torch", torch.__version__))
    pairs.append(("python", sys.version.split()[0]))
    return pairs


# The Megatron code the bridge runs: megatron/core/tensor_parallel/random.py wherever megatron.core
# imports without Megatron's training code. Resolved, seeded, forked, read, and called (a body
# drawing from all three RNG sources recomputed the same numbers) with the venv's torch on CPU:
# megatron-core 0.2.0, 0.5.0, 0.8.0, 0.11.0, 0.12.3, 0.13.1, 0.14.0, 0.15.3 (with
# TORCH_CUDA_ARCH_LIST set: _cuda_extension_built_without_gpu), 0.16.1; Megatron-LM 0d982fcb0a
# (2024-04), 8f2f70067c (2026-01, the last before the current state name), core_v0.17.1,
# core_v0.19.0, main d98e8a64dd. Refused: trees before 38644dd756 (_training_package_ran) and
# megatron/mpu/random.py (check_tracker). Before megatron-core 0.4 (3c637fc0d2) the seed adds
# model-parallel-rng alone. docs/python.md has the table of versions.
SUPPORTED_TRACKER = "megatron-core 0.2 or later, and Megatron-LM since 2024-03-26 (38644dd756)"


def package_version(module):
    """The version the module's own package declares (megatron.core's package_info.py), which for
    a source tree on PYTHONPATH is not the installed distribution's: "megatron.core 0.19.1", or
    "" when its package declares none."""
    parts = (module.__package__ or "").split(".")
    while parts and parts[0]:
        name = ".".join(parts)
        try:
            info = importlib.import_module(name + ".package_info")
            if hasattr(info, "__version__"):
                return f"{name} {info.__version__}"
        except ImportError:
            pass
        parts.pop()
    return ""


def _tracker_states(tracker):
    """The tracker's states by name: its states_ (no copy), or get_states() where a tracker keeps
    them otherwise."""
    return tracker.states_ if hasattr(tracker, "states_") else tracker.get_states()


def check_tracker(module):
    """Refuses, before any case, a module whose tracker the bridge cannot use, naming what is
    missing and what is supported: otherwise every case would fail the same way. The bridge reads
    the states (states_ or get_states), forks (fork), and seeds through the module's
    model_parallel_cuda_manual_seed, which adds the states (add). The current state name
    (_current_state_name, Megatron-LM 965cfd316c, 2026-01-09) is read where it exists."""
    found = package_version(module) or "a package of unknown version"
    if (module.__package__ or "").split(".")[:2] == ["megatron", "mpu"]:
        raise ImportError(f"{module.__file__}: megatron/mpu/random.py (Megatron-LM before c2ea914f7d, 2022-09-23) "
                          f"seeds its tracker only inside a started Megatron job (its model_parallel_cuda_manual_seed "
                          f"asks torch.distributed for the rank and megatron.mpu for the data-parallel rank), and "
                          f"recheck starts Megatron's parallel state through megatron.core's parallel_state only; "
                          f"supported: {SUPPORTED_TRACKER}; found {found}")
    tracker = module.get_cuda_rng_tracker()
    missing = [name for name in ("fork", "add") if not hasattr(tracker, name)]
    if not (hasattr(tracker, "states_") or hasattr(tracker, "get_states")):
        missing.insert(0, "states_ (or get_states)")
    if missing:
        raise ImportError(f"{module.__file__}: its CudaRNGStatesTracker ({type(tracker).__name__}) lacks "
                          f"{' and '.join(missing)}, which recheck seeds, forks and reads the tracker through; "
                          f"supported: {SUPPORTED_TRACKER}; found {found}")


def parallel_state_of(module):
    """Megatron's parallel_state for the package a module is in (megatron.core's for
    megatron.core.tensor_parallel.random, from a file of a checkout too), or None."""
    parts = (module.__package__ or "").split(".")
    while parts and parts[0]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return importlib.import_module(".".join(parts) + ".parallel_state")
        except ImportError:
            parts.pop()
    return None


def distributes(module):
    """Whether a Megatron-style module can distribute saved activations here: it splits and
    gathers through Megatron's tensor-parallel group, which recheck can start."""
    return (hasattr(module, "split_tensor_into_1d_equal_chunks") and hasattr(module, "gather_split_1d_tensor")
            and parallel_state_of(module) is not None)


def start_tensor_parallel(module, rank, world_size, rendezvous, timeout_seconds):
    """A torch.distributed group (gloo: CPU tensors, loopback) of `world_size` ranks, this process
    rank `rank`, and Megatron's parallel state on it with every rank in one tensor-parallel group,
    so that Megatron's own split_tensor_into_1d_equal_chunks and gather_split_1d_tensor run. One
    rank needs no rendezvous (an in-process store); more meet in the file `rendezvous`. Once per
    process; a second variant of the same package finds it started."""
    import datetime

    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_seconds)
    if not dist.is_initialized():
        if world_size == 1:
            store = dist.HashStore()
        else:
            store = dist.FileStore(rendezvous, world_size)
        with _single_threaded_gloo():
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    elif dist.get_world_size() != world_size or dist.get_rank() != rank:
        raise RuntimeError(f"torch.distributed is already started here as rank {dist.get_rank()} of "
                           f"{dist.get_world_size()}, not {rank} of {world_size}")
    state = parallel_state_of(module)
    if not state.model_parallel_is_initialized():
        with _single_threaded_gloo():
            state.initialize_model_parallel(tensor_model_parallel_size=world_size)
    elif state.get_tensor_model_parallel_world_size() != world_size:
        raise RuntimeError(f"{state.__name__} is already initialized with a tensor-parallel size of "
                           f"{state.get_tensor_model_parallel_world_size()}, not {world_size}")


    _count_no_collective(module)
    group = state.get_tensor_model_parallel_group()
    if group not in _settle_groups:
        # Made here, before any run: a tensor made in a run would count as the run's memory.
        _settle_groups[group] = torch.zeros(1)
        settle()


_settle_groups = {}


def _count_no_collective(module):
    """Megatron's all-gather, made harmless to recheck's memory verdicts. What it allocates for
    itself (gloo's flat copies of the output) is not counted: the communication library's
    buffers, which NCCL keeps outside PyTorch's allocator on a GPU and recheck's C++ port, whose
    gather writes into its output, does not make. Megatron's own buffers (the chunk, the gathered
    tensor) stay counted. And the collective lets go of its tensors as it returns (settle), not
    when gloo's worker thread next runs. Megatron's utils keep the function they call as
    dist_all_gather_func; older code calls torch.distributed's."""
    import torch.distributed as dist

    def uncounted(function):
        if getattr(function, "_recheck_uncounted", False):
            return function

        def call(*args, **kwargs):
            result = _recheck.call_uncounted(function, *args, **kwargs)
            # The worker thread lets go of the collective's tensors (Megatron's chunk) when it
            # starts the next collective: now, as Megatron's code lets go of them, not at some
            # later moment a busy machine decides, which would move the peak.
            _recheck.call_uncounted(settle)
            return result

        call._recheck_uncounted = True
        return call

    gather = getattr(module, "gather_split_1d_tensor", None)
    if gather is not None and "dist_all_gather_func" in gather.__globals__:
        gather.__globals__["dist_all_gather_func"] = uncounted(gather.__globals__["dist_all_gather_func"])
    for name in ("all_gather_into_tensor", "_all_gather_base"):
        if hasattr(dist, name):
            setattr(dist, name, uncounted(getattr(dist, name)))


@contextlib.contextmanager
def _single_threaded_gloo():
    """Gloo groups made meanwhile run their collectives on one worker thread, which drops its
    reference to a collective's tensors (Megatron's chunk, the gathered buffer) when the next one
    starts, or later. One thread makes settle() exact: see there."""
    import torch.distributed.distributed_c10d as c10d

    real = c10d.ProcessGroupGloo

    class SingleThreaded(real):
        def __init__(self, store, rank, size, timeout):
            options = real._Options()
            options._timeout = timeout
            options._devices = [real.create_device(hostname="127.0.0.1")]
            options._threads = 1
            super().__init__(store, rank, size, options)

    c10d.ProcessGroupGloo = SingleThreaded
    try:
        yield
    finally:
        c10d.ProcessGroupGloo = real


def settle():
    """Waits until the tensor-parallel group's worker thread has let go of every collective's
    tensors: an all-reduce of a tensor made beforehand, behind the collectives of the run on the
    group's one thread, which releases each collective before it starts the next. recheck reads
    the memory a run holds after this."""
    import torch.distributed as dist

    for group, tensor in _settle_groups.items():
        dist.all_reduce(tensor, group=group)


def as_tuple(outputs):
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def cuda_ready():
    """torch.cuda initialised in this process, as in a Python program that made CUDA tensors: recheck
    makes them in C++, which leaves torch.cuda._initialized False, and torch.utils.checkpoint then
    stashes no device RNG state."""
    if torch.cuda.is_initialized():
        return
    if torch.cuda._is_in_bad_fork():
        raise RuntimeError(
            "torch.cuda cannot start in this process: CUDA was started in the process it was forked "
            "from (recheck run's, while it imported the variant's module: with "
            "PYTORCH_NVML_BASED_CUDA_CHECK=0, without NVML, or by a module that queries the device "
            "when imported); run with --no-isolate")
    torch.cuda.init()


class WithoutOutput:
    """The variants of a subject whose checkpoints discard their outputs (CHECKPOINT_STYLE
    "without_output", python/megatron_without_output/variants.py): `make()` gives an object with
    Megatron's CheckpointWithoutOutput interface (checkpoint, discard_output_and_register_recompute);
    the cases' plain checkpoints call the variant's plain_checkpoint, else the module's
    checkpoint(body, distribute, *args); a discard goes to the variant's discard_together(objects,
    hook) where it has one (a manager), else the module's, else to each object's
    discard_output_and_register_recompute; a variant's cannot_run() says why it cannot run here."""

    def __init__(self, module, make):
        self.module = module
        self.make = make


def call_without_output(function, body, args):
    """Runs a checkpoint without output: its outputs, and the object that discards them."""
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        cuda_ready()
    kept = function.make()
    return as_tuple(kept.checkpoint(body, *args)), kept


def discard(function, kept, hook):
    together = getattr(function.make, "discard_together", None) or getattr(function.module, "discard_together", None)
    if together is not None:
        together(kept, hook)
        return
    for one in kept:
        one.discard_output_and_register_recompute(hook)


def call(function, style, body, distribute, args, options):
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        cuda_ready()
    if style == "without_output":
        plain = getattr(function.make, "plain_checkpoint", function.module.checkpoint)
        return as_tuple(plain(body, distribute, *args))
    if style == "torch":
        return as_tuple(function(body, *args, use_reentrant=True))
    if style == "function":
        # The call options the module declares (CALL_OPTIONS), as the case drew them.
        return as_tuple(function(body, *args, **options))
    if style == "convention":
        # As the spec's ATTR@WORDS says (python/conventions.py).
        return as_tuple(function(body, distribute, args, options))
    apply = getattr(function, "apply", None)
    if apply is not None:
        return as_tuple(apply(body, distribute, *args))
    return as_tuple(function(body, distribute, *args))


# model_parallel_cuda_manual_seed's rank arguments (megatron-core 0.13 and later), and the
# parallel-state globals its rank getters return first when set (those before it read only them).
_RANK_ARGUMENTS = ("tp_rank", "ep_rank", "etp_rank")
_RANK_GLOBALS = ("_MPU_TENSOR_MODEL_PARALLEL_RANK", "_MPU_EXPERT_MODEL_PARALLEL_RANK",
                 "_MPU_EXPERT_TENSOR_PARALLEL_RANK")


def _parameters_of(function):
    import inspect

    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}


@contextlib.contextmanager
def _ranks_read_as_zero(state):
    """Megatron's rank getters answer 0 meanwhile, as rank 0 of every group, and their globals are
    put back after: left set, a second rank of a distributing run would split as rank 0 too."""
    saved = {name: getattr(state, name) for name in _RANK_GLOBALS if state is not None and hasattr(state, name)}
    try:
        for name in saved:
            setattr(state, name, 0)
        yield
    finally:
        for name, value in saved.items():
            setattr(state, name, value)


def _rank_state_of(module):
    """The module whose globals the tracker module's rank getter reads (megatron.core.parallel_state
    of the package the module was loaded into), or None."""
    import sys

    getter = getattr(module, "get_tensor_model_parallel_rank", None)
    owner = sys.modules.get(getattr(getter, "__module__", None) or "")
    return owner if owner is not None else parallel_state_of(module)


def tracker_seed(module, seed, cpu_shim):
    """Seeds Megatron's tracker with its own model_parallel_cuda_manual_seed, as rank 0 of every
    group on every rank (docs/python.md), whichever way the version takes the ranks: as arguments
    (0.13 and later), or from the parallel state (before), whether or not a process group exists."""
    use_cpu_device_shim(cpu_shim)
    use_megatron_shim(module, cpu_shim)
    seed_tracker = module.model_parallel_cuda_manual_seed
    parameters = _parameters_of(seed_tracker)
    options = {name: 0 for name in _RANK_ARGUMENTS if name in parameters}
    if seeds_cudagraphable_rng(module):
        # The tracker made anew as Megatron makes it for CUDA graphs (resolve made one without).
        forget_shared_generator()
        options["use_cudagraphable_rng"] = True
        if "force_reset_rng" in parameters:
            options["force_reset_rng"] = True
        elif hasattr(module, "_CUDA_RNG_STATE_TRACKER_INITIALIZED"):
            module._CUDA_RNG_STATE_TRACKER_INITIALIZED = False
    with _ranks_read_as_zero(_rank_state_of(module)):
        seed_tracker(seed, **options)


def tracker_enter(module, name):
    context = module.get_cuda_rng_tracker().fork(name)
    context.__enter__()
    return context


def tracker_exit(context):
    context.__exit__(None, None, None)


def tracker_read(module):
    """(the tracker's states by name, its current state name), the name None where the tracker
    keeps none (Megatron before 965cfd316c, 2026-01-09): the C++ side then compares no name."""
    tracker = module.get_cuda_rng_tracker()
    states = {name: state_tensor(state) for name, state in _tracker_states(tracker).items()}
    return states, getattr(tracker, "_current_state_name", None)


def flag(module):
    return bool(getattr(module, "IS_CHECKPOINTING", False))


def reset_flag(module):
    if hasattr(module, "IS_CHECKPOINTING"):
        module.IS_CHECKPOINTING = False
