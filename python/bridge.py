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


def _count_what_python_logs():
    megatron = logging.getLogger("megatron")
    megatron.addHandler(_Counted())
    megatron.propagate = False
    # Every warning a case's Python code raises is counted, not only the first from each place.
    warnings.showwarning = _count_warning
    warnings.simplefilter("always")


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


_original_module = {}


def use_megatron_shim(module, enabled):
    """Megatron's _get_cuda_rng_state / _set_cuda_rng_state, on CPU, go to the stand-in."""
    if not hasattr(module, "_get_cuda_rng_state"):
        return
    key = module.__name__
    if key not in _original_module:
        _original_module[key] = (module._get_cuda_rng_state, module._set_cuda_rng_state)
    if enabled:
        module._get_cuda_rng_state = lambda device="cuda", clone=False, graph_safe=False: _recheck.device_get_state()
        module._set_cuda_rng_state = lambda new_state, device=-1, graph_safe=False: _recheck.device_set_state(new_state)
    else:
        module._get_cuda_rng_state, module._set_cuda_rng_state = _original_module[key]


def package_of(folder):
    """The package a folder is, as Python imports it: the longest dotted name made of the folder's
    name and its parents' (identifiers all) that Python can import. A namespace package (the
    megatron of the megatron-core wheel has no __init__.py) counts. "" when none is importable;
    an error naming the package when the folder is a regular package (it has __init__.py) that
    Python cannot import."""
    import importlib.util
    import os

    names = []
    while folder and os.path.basename(folder).isidentifier() and len(names) < 8:
        names.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    for start in range(len(names)):
        candidate = ".".join(names[start:])
        try:
            if importlib.util.find_spec(candidate) is not None:
                importlib.import_module(candidate)
                return candidate
        except (ImportError, ValueError):
            continue
    if names and os.path.isfile(os.path.join(folder, *names, "__init__.py")):
        raise ImportError(f"{os.path.join(folder, *names)} is the package {names[-1]}, which this Python cannot "
                          f"import: put its source tree on PYTHONPATH")
    return ""


def load_file(path):
    """A .py file as a module of its own, whatever other module shares its code: a base revision's
    random.py and a head revision's in one process. A file inside a package (folders with
    __init__.py above it) is loaded into that package, so that its relative imports (random.py's
    `from .utils import ...`) find the package's other modules where Python finds the package."""
    import importlib.util
    import os
    import sys

    path = os.path.abspath(path)
    if path in _loaded_files:
        return _loaded_files[path]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no file {path}")
    package = package_of(os.path.dirname(path))
    name = (package + "." if package else "") + f"recheck_file_{len(_loaded_files)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _loaded_files[path] = module
    return module


_loaded_files = {}


def resolve(module_name, attr):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # megatron-core warns about missing Apex and TE on import
            if module_name.endswith(".py"):
                module = load_file(module_name)
            else:
                module = importlib.import_module(module_name)
    except Exception as error:
        # The exception's type and where it was raised: a bare "list index out of range" reads
        # like recheck's own mistake (megatron-core 0.15 compiles CUDA code on import, and
        # torch's extension builder raises that IndexError on a machine without a GPU).
        import traceback

        frames = traceback.extract_tb(error.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ImportError(f"importing {module_name} raised {type(error).__name__}: {error}{where}") from error
    if not hasattr(module, attr):
        raise AttributeError(f"module {module_name} has no attribute {attr}")
    style = "torch" if module_name == "torch.utils.checkpoint" else "megatron"
    has_tracker = hasattr(module, "get_cuda_rng_tracker") and hasattr(module, "model_parallel_cuda_manual_seed")
    if has_tracker:
        check_tracker(module)
    # The code's name, whatever file it was loaded from: two revisions of megatron-core's
    # random.py (a base and a head) are the same code, whose allocations recheck compares.
    logical = module_name
    if module_name.endswith(".py"):
        import os

        stem = os.path.splitext(os.path.basename(module_name))[0]
        logical = (module.__package__ + "." if module.__package__ else "") + stem
    return module, getattr(module, attr), style, has_tracker, logical, style == "megatron" and distributes(module)


def provenance(module):
    """Where a variant's code came from: its module's file, the version of the distribution that
    installed the package (which may not be where the file is: a source tree on PYTHONPATH), the
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
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            dist_files = importlib.metadata.distribution(dist)
            version = dist_files.version
            root = os.path.abspath(str(dist_files.locate_file("")))
            where = "" if path.startswith(root + os.sep) else ", not where the module file is"
            pairs.append((dist, f"{version} installed{where}"))
        except importlib.metadata.PackageNotFoundError:
            pass
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


# What the bridge reads of Megatron's CudaRNGStatesTracker: megatron-core 0.16 and later have it
# (0.15 and earlier keep no current state name). docs/python.md has the table of versions tried.
SUPPORTED_TRACKER = "megatron-core 0.16 or later (tested: 0.16.1 to 0.19.0, main and dev)"


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


def check_tracker(module):
    """Refuses, before any case, a module whose tracker the bridge cannot read, naming what is
    missing and what is supported: otherwise every case would fail the same way."""
    tracker = module.get_cuda_rng_tracker()
    missing = [name for name in ("states_", "_current_state_name", "fork", "add") if not hasattr(tracker, name)]
    if missing:
        found = package_version(module) or "a package of unknown version"
        raise ImportError(f"{module.__file__}: its CudaRNGStatesTracker ({type(tracker).__name__}) has no "
                          f"{', '.join(missing)}, which recheck reads the tracker's states through; supported: "
                          f"{SUPPORTED_TRACKER}; found {found}")


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


def call(function, style, body, distribute, args):
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        cuda_ready()
    if style == "torch":
        return as_tuple(function(body, *args, use_reentrant=True))
    apply = getattr(function, "apply", None)
    if apply is not None:
        return as_tuple(apply(body, distribute, *args))
    return as_tuple(function(body, distribute, *args))


def tracker_seed(module, seed, cpu_shim):
    use_cpu_device_shim(cpu_shim)
    use_megatron_shim(module, cpu_shim)
    try:
        module.model_parallel_cuda_manual_seed(seed, tp_rank=0, ep_rank=0, etp_rank=0)
    except TypeError:  # an older Megatron without the rank arguments: one rank of each group
        from megatron.core import parallel_state
        parallel_state._MPU_TENSOR_MODEL_PARALLEL_RANK = 0
        parallel_state._MPU_EXPERT_MODEL_PARALLEL_RANK = 0
        module.model_parallel_cuda_manual_seed(seed)


def tracker_enter(module, name):
    context = module.get_cuda_rng_tracker().fork(name)
    context.__enter__()
    return context


def tracker_exit(context):
    context.__exit__(None, None, None)


def tracker_read(module):
    tracker = module.get_cuda_rng_tracker()
    return dict(tracker.states_), tracker._current_state_name


def flag(module):
    return bool(getattr(module, "IS_CHECKPOINTING", False))


def reset_flag(module):
    if hasattr(module, "IS_CHECKPOINTING"):
        module.IS_CHECKPOINTING = False
