"""Loading the code under test, and saying truly why it could not be loaded: a .py file as a
module of its own inside the package Python knows its folder as, and an import failure named by
the exception and the place in that code where it was raised. Embedded into recheck and run in
the bridge's module after python/bridge.py, whose count_logs_of it calls: the two share one
namespace, and bridge.py's resolve loads files through load_file."""
import importlib


class CodeImportError(ImportError):
    """Importing the code under test (or the package a file is loaded into) raised: the message
    already says what was imported, the exception, and where in that code it was raised."""


def _is_under(path, folders):
    import os

    real = os.path.realpath(path)
    return any(real == folder or real.startswith(folder + os.sep) for folder in folders)


def _folders_of_package(top_level):
    """The folders a top-level package is found in, as Python finds it, without running its code
    (a top-level find_spec imports nothing): every portion of a namespace package, or the folder
    of a regular one; for a top-level module, its file."""
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec(top_level)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.realpath(folder) for folder in spec.submodule_search_locations]
    return [os.path.realpath(spec.origin)] if spec.origin else []  # a module: its file alone


def _code_frames(error):
    """The traceback's frames, outermost first, that are someone's code: not the import system's
    own (CPython leaves some <frozen importlib._bootstrap> frames in) and not this bridge's."""
    import os
    import traceback

    import_system = os.path.dirname(os.path.realpath(importlib.__file__)) + os.sep
    frames = []
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        filename = frame.f_code.co_filename
        if (frame.f_globals is globals() or filename.startswith("<frozen importlib")
                or os.path.realpath(filename).startswith(import_system)):
            continue
        frames.append(traceback.FrameSummary(frame.f_code.co_filename, lineno, frame.f_code.co_name,
                                             lookup_line=False))
    return frames


def _training_package_ran(error, frames, code_folders):
    import os

    for frame in frames:
        if frame.filename.split(os.sep)[-2:] == ["megatron", "__init__.py"]:
            return (f"{frame.filename} makes megatron a regular package, which Python runs before any of its "
                    f"subpackages (megatron.core, megatron.mpu), and with it Megatron's training code: global "
                    f"args, tokenizers, initialize, and apex with its CUDA extension amp_C (megatron/utils.py); "
                    f"Megatron-LM before 2024-03-26 (38644dd756 made megatron a namespace package) needs "
                    f"those installed")
    return ""


def _cuda_extension_built_without_gpu(error, frames, code_folders):
    if isinstance(error, IndexError) and frames and frames[-1].name == "_get_cuda_arch_flags":
        return ("the import builds a CUDA extension (torch.utils.cpp_extension; megatron-core 0.15 does at "
                "import) and, without a GPU, torch finds no CUDA architecture to build for, which that code does "
                "not catch: set TORCH_CUDA_ARCH_LIST (e.g. 9.0) to let the build fail the way it catches, or run "
                "on a GPU")
    return ""


def _checkpoint_in_mpu(error, frames, code_folders):
    import os

    for folder in code_folders:
        old_home = os.path.join(folder, "mpu", "random.py")
        if os.path.basename(folder) == "megatron" and os.path.isfile(old_home):
            return (f"this tree's checkpoint code is {old_home} (its home before Megatron-LM c2ea914f7d, "
                    f"2022-09-23), whose package imports Megatron's global args (megatron/mpu/layers.py: from "
                    f"megatron import get_args), so it runs only with Megatron's training code")
    return ""


# Import failures that old Megatron code is known to raise, whose exception alone does not say
# why or what to do: each returns a sentence, or "" when it does not apply.
_KNOWN_IMPORT_FAILURES = (_training_package_ran, _cuda_extension_built_without_gpu, _checkpoint_in_mpu)


def describe_import_failure(what, error, code_folders):
    """"importing WHAT raised TYPE: MESSAGE at FILE:LINE", FILE:LINE the deepest frame in the code
    under test (code_folders: where its package is), which is where that code asked for what
    failed; when the exception was raised deeper, in another package (torch's extension builder,
    a third-party module), that place follows. A bare "list index out of range" at torch's line
    reads like recheck's own mistake; the line of the code under test says what to look at."""
    frames = _code_frames(error)
    raised_at = frames[-1] if frames else None
    in_code = [frame for frame in frames if _is_under(frame.filename, code_folders)]
    asked_at = in_code[-1] if in_code else raised_at
    where = f" at {asked_at.filename}:{asked_at.lineno}" if asked_at else ""
    if raised_at is not None and raised_at is not asked_at:
        where += f" (raised in {raised_at.filename}:{raised_at.lineno})"
    causes = [sentence for known in _KNOWN_IMPORT_FAILURES if (sentence := known(error, frames, code_folders))]
    return f"importing {what} raised {type(error).__name__}: {error}{where}" + "".join("; " + c for c in causes)


def _not_found(error, name):
    """Whether an exception of importing `name` means only that `name` (or a package above it)
    does not exist, as opposed to its code raising while it ran."""
    missing = getattr(error, "name", None)
    return (isinstance(error, ModuleNotFoundError) and missing is not None
            and (name == missing or name.startswith(missing + ".")))


def package_of(folder):
    """The package a folder is, as Python imports it: the SHORTEST dotted name made of the folder's
    name and its parents' (identifiers all) that Python imports as a package. A namespace package
    (the megatron of the megatron-core wheel has no __init__.py) counts.

    Shortest, because that is the name Megatron's own absolute imports (`from megatron.core
    import parallel_state`) use: a longer one (trees.head.megatron.core.tensor_parallel, found
    only because the working folder is on sys.path) would give the file a second copy of
    Megatron, with a parallel_state that the rest of Megatron never initializes, and a name that
    changes with the working folder. The package found need not be the folder itself: a base
    revision's random.py is loaded into the head tree's package on PYTHONPATH (tools/gate-pr), or
    into the installed megatron-core, so that its relative imports find that package's modules.

    "" when no such name exists. A regular package (with __init__.py) that Python cannot find is
    an error naming it; one whose import raised is an error describing that exception."""
    import importlib.util
    import os

    names = []
    while folder and os.path.basename(folder).isidentifier() and len(names) < 8:
        names.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    for start in range(len(names) - 1, -1, -1):
        candidate = ".".join(names[start:])
        try:
            if importlib.util.find_spec(candidate) is None:
                continue
            package = importlib.import_module(candidate)
        except ValueError:  # find_spec: a module in sys.modules without a spec
            continue
        except Exception as error:
            if _not_found(error, candidate):
                continue
            code_folders = [os.path.realpath(os.path.join(folder, *names[:start + 1]))]
            code_folders += _folders_of_package(names[start])
            raise CodeImportError(describe_import_failure(
                f"{candidate}, the package a file of {os.path.join(folder, *names)} is loaded into,", error,
                code_folders)) from error
        if hasattr(package, "__path__"):
            return candidate
    # The regular packages the folder is in (those with __init__.py, from the folder up).
    regular = 0
    while regular < len(names) and os.path.isfile(os.path.join(folder, *names[:len(names) - regular], "__init__.py")):
        regular += 1
    if regular:
        tree = os.path.join(folder, *names[:len(names) - regular])
        raise CodeImportError(f"{os.path.join(folder, *names)} is the package {'.'.join(names[-regular:])}, which "
                              f"this Python cannot find: put its source tree ({tree}) on PYTHONPATH")
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
    count_logs_of(name.split(".")[0])  # from its first line: what it logs on import is counted too
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]  # as Python's import does: a module that raised is not left importable
        # The code under test: the file's own tree (the folder of its top-level package) and
        # the package it was loaded into, wherever Python found that.
        levels = package.count(".") + 1 if package else 0
        tree = os.path.realpath(os.path.dirname(path))
        for _ in range(max(levels - 1, 0)):
            tree = os.path.dirname(tree)
        code_folders = [tree] + (_folders_of_package(package.split(".")[0]) if package else [])
        raise CodeImportError(describe_import_failure(path, error, code_folders)) from error
    _loaded_files[path] = module
    return module


_loaded_files = {}


def logical_name(module, path):
    """A file's module name, whatever folder it was loaded from (package_of): two revisions of a
    file are the same code."""
    import os

    stem = os.path.splitext(os.path.basename(path))[0]
    return (module.__package__ + "." if module.__package__ else "") + stem


def attribute(owner, dotted):
    """owner.A.B for "A.B", or None where a part is missing."""
    for part in dotted.split("."):
        if not hasattr(owner, part):
            return None
        owner = getattr(owner, part)
    return owner
