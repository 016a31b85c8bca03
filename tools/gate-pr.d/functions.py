"""The checkpoint functions tools/gate-pr runs: which of Megatron's entry points each tree's
random.py holds (read, not imported), and how the time budget is shared among them.

    python3 functions.py list BASE_FILE HEAD_FILE
        one line per entry point: ID <tab> ATTR <tab> SUBJECT <tab> WHERE <tab> WHAT <tab> RUN
        WHERE: both, base (the head removed it) or head (the head adds it); SUBJECT "-" for
        the default subject (CheckpointFunction's properties); RUN: default (the gate runs it
        unless --functions says otherwise) or opt-in (only when --functions names it), then why
    python3 functions.py shares SECONDS BASE_FILE HEAD_FILE ID:LINES_FILE...
        one line per function: ID <tab> SECONDS: the budget split equally among the functions
        whose slice ran a line of the change, or among them all where none did
"""
import ast
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import changed_lines  # noqa: E402

WITHOUT_OUTPUT = "megatron-checkpoint-without-output"

# Run only when --functions names them, and why: the gate's default must raise no false alarm.
OPT_IN = {
    "CheckpointFunction+cudagraphable-rng":
        "on CPU its generator states are recheck's emulation of CUDA's shared ones, not yet confirmed on a GPU "
        "(docs/scripts/cudagraphable_rng_recompute_mask.py); on Megatron-LM 965cfd316c it failed the fix",
}

# (id, attribute the bridge resolves, subject, what it is, whether the tree holds it)
ENTRY_POINTS = (
    ("CheckpointFunction", "CheckpointFunction", "", "the autograd Function",
     lambda names, seeds: "CheckpointFunction" in names),
    ("checkpoint", "checkpoint", "", "the checkpoint() wrapper around it",
     lambda names, seeds: "checkpoint" in names),
    ("CheckpointWithoutOutput", "CheckpointWithoutOutput", WITHOUT_OUTPUT,
     "a checkpoint whose outputs the caller discards, each discard its own",
     lambda names, seeds: "CheckpointWithoutOutput" in names),
    ("CheckpointWithoutOutputManager", "CheckpointWithoutOutputManager", WITHOUT_OUTPUT,
     "CheckpointWithoutOutput, the discards of a layer made by its manager",
     lambda names, seeds: "CheckpointWithoutOutputManager" in names and "CheckpointWithoutOutput" in names),
    ("MHCCheckpointManager", "MHCCheckpointManager", WITHOUT_OUTPUT,
     "CheckpointWithoutOutput, the discards of a layer made by the MHC manager",
     lambda names, seeds: "MHCCheckpointManager" in names and "CheckpointWithoutOutput" in names),
    ("CheckpointFunction+cudagraphable-rng", "CheckpointFunction+cudagraphable-rng", "",
     "CheckpointFunction with the tracker Megatron makes for CUDA graphs (use_cudagraphable_rng)",
     lambda names, seeds: "CheckpointFunction" in names and "use_cudagraphable_rng" in seeds),
)


def top_level(path):
    """(names the file defines at its top level, the parameters of its model_parallel_cuda_manual_seed)."""
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read(), filename=path)
    names, seeds = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            if node.name == "model_parallel_cuda_manual_seed" and not isinstance(node, ast.ClassDef):
                arguments = node.args
                seeds.update(a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs)
    return names, seeds


def entry_points(base_file, head_file):
    held = {}
    for side, path in (("base", base_file), ("head", head_file)):
        names, seeds = top_level(path)
        held[side] = {entry[0] for entry in ENTRY_POINTS if entry[4](names, seeds)}
    found = []
    for ident, attr, subject, what, _ in ENTRY_POINTS:
        where = ("both" if ident in held["base"] and ident in held["head"] else
                 "base" if ident in held["base"] else "head" if ident in held["head"] else "")
        if where:
            found.append((ident, attr, subject, where, what))
    return found


def shares(seconds, base_file, head_file, ran):
    """{id: seconds}: `ran` maps each function to its slice's lines file."""
    reached = []
    for ident, lines_file in ran:
        change = changed_lines.coverage_of_change(base_file, head_file, [lines_file])
        if not change.get("error") and change["ran"]:
            reached.append(ident)
    chosen = reached or [ident for ident, _ in ran]
    if not chosen:
        return {}
    each, left = divmod(seconds, len(chosen))
    return {ident: each + (1 if i < left else 0) for i, ident in enumerate(chosen)}


def main(argv):
    if len(argv) >= 3 and argv[0] == "list":
        try:
            found = entry_points(argv[1], argv[2])
        except (OSError, SyntaxError, ValueError) as error:
            print(f"cannot read the trees' checkpoint functions: {error}", file=sys.stderr)
            return 2
        for ident, attr, subject, where, what in found:
            run = "opt-in: " + OPT_IN[ident] if ident in OPT_IN else "default"
            print("\t".join((ident, attr, subject or "-", where, what, run)))
        return 0
    if len(argv) >= 4 and argv[0] == "shares":
        ran = [tuple(arg.split(":", 1)) for arg in argv[4:]]
        for ident, seconds in shares(int(argv[1]), argv[2], argv[3], ran).items():
            if seconds > 0:
                print(f"{ident}\t{seconds}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
