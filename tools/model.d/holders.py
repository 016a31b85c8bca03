"""Who holds a tensor, and how many bytes live tensors hold: the attribution tools/model prints.

A tensor is alive while something references its Python object or its TensorImpl. From Python,
gc.get_referrers finds the objects that reference it; walking them upward stops at a named root
(a model's module, its parameter or buffer dictionary, a module's globals, a retained frame, an
lru_cache). What only C++ holds (another tensor's .grad, a view's base, an autograd node's saved
tensor or AccumulateGrad) is found by looking at every live tensor and the graphs behind them.

Pitfalls this code avoids (each met once): running frames never appear as referrers on Python
3.11; the lists gc.get_referrers returns, and zip()'s reused result tuple, would appear as
referrers of the next level; a frame object kept in a local makes a cycle that keeps the target
alive while the collector is off; storage addresses are reused, so a storage is known by an
address and a tensor still alive that owns it.
"""
import functools
import gc
import sys
import types
import weakref

import torch


def live_tensors():
    """Every tensor object gc tracks (a dead weak proxy among gc's objects raises when asked its type)."""
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor):
                yield o
        except ReferenceError:
            continue


def storages():
    """Every live CPU tensor storage, by address: (bytes, weak references to the tensors on it).
    Every tensor gc knows, and its .grad (a gradient made in C++ has no Python object until read);
    views and detached aliases share a storage and count once."""
    found = {}
    for o in live_tensors():
        for t in (o, o._grad):
            if t is None or t.layout != torch.strided or t.device.type != "cpu":
                continue
            try:
                s = t.untyped_storage()
                address = s.data_ptr()
            except RuntimeError:  # a fake tensor of a compiler's tracing (no data): holds no bytes
                continue
            if address:
                nbytes, refs = found.setdefault(address, (s.nbytes(), []))
                refs.append(weakref.ref(t))
    return found


def held_bytes():
    return sum(n for n, _ in storages().values())


def root_names(model):
    """id -> name of the roots a path may start from: the model's modules and their attribute,
    parameter and buffer dictionaries, and every imported module's globals."""
    names = {}
    for name, module in model.named_modules(prefix="model"):
        for obj, suffix in ((module, ""), (module.__dict__, ""), (module._parameters, "._parameters"),
                            (module._buffers, "._buffers")):
            names[id(obj)] = name + suffix
    for name, module in sorted(sys.modules.items(), key=lambda kv: kv[0] != "__main__"):
        if isinstance(module, types.ModuleType) and id(getattr(module, "__dict__", None)) not in names:
            names[id(module.__dict__)] = f"<global {name}>"
    return names


def edge(holder, target):
    if isinstance(holder, dict):
        key = next((k for k, v in holder.items() if v is target), "?")
        return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
    if isinstance(holder, (list, tuple)):
        return "[" + ",".join(str(i) for i, v in enumerate(holder) if v is target) + "]"
    if isinstance(holder, types.FrameType):
        return f"<local of {holder.f_code.co_name}>"
    if isinstance(holder, types.CellType):
        return "<cell>"
    # An object keeping it as an attribute (Python 3.11 keeps attributes inline, so the object
    # itself, not its __dict__, is the referrer).
    attributes = getattr(holder, "__dict__", None)
    if isinstance(attributes, dict):
        key = next((k for k, v in attributes.items() if v is target), None)
        if key is not None:
            return f".{key}"
    return f"<{type(holder).__name__}>"


def referrer_paths(target, names, max_depth=7, max_paths=4):
    """Paths from named roots down to `target`, found breadth first through gc.get_referrers."""
    ignore, paths, seen = set(), [], {id(target)}
    objs, chains = [target], [""]
    ignore.update((id(objs), id(chains)))
    for _ in range(max_depth):
        next_objs, next_chains = [], []
        ignore.update((id(next_objs), id(next_chains)))
        for i in range(len(objs)):
            obj, chain = objs[i], chains[i]
            refs = gc.get_referrers(obj)
            ignore.add(id(refs))
            for ref in refs:
                if id(ref) in ignore or id(ref) in seen:
                    continue
                seen.add(id(ref))
                step = edge(ref, obj) + chain
                if id(ref) in names:
                    paths.append(names[id(ref)] + step)
                elif isinstance(ref, types.FrameType):
                    paths.append(f"a retained frame of {ref.f_code.co_name}" + step)
                elif isinstance(ref, functools._lru_cache_wrapper):
                    paths.append(f"lru_cache {ref.__qualname__}" + step)
                else:
                    next_objs.append(ref)
                    next_chains.append(step)
                if len(paths) >= max_paths:
                    return paths
        objs, chains = next_objs, next_chains
        if not objs:
            break
    # Chains that reached no named root: the innermost objects of the last level, which only C++
    # (a hook, a node) keeps.
    return paths or [f"a {type(o).__name__} that no named root reaches, holding it as {c}" for o, c in
                     zip(objs, chains)][:max_paths]


def saved_by(node, target):
    """The names under which an autograd node saved `target`: a built-in node's _saved_*
    attributes, a custom Function's saved_tensors."""
    names = []
    for attribute in dir(node):
        if attribute.startswith("_saved_"):
            try:
                if getattr(node, attribute, None) is target:
                    names.append(attribute)
            except RuntimeError:  # freed by a backward that ran
                continue
    try:
        if any(saved is target for saved in getattr(node, "saved_tensors", ()) or ()):
            names.append("saved_tensors")
    except RuntimeError:
        pass
    return names


def cpp_holders(target, names):
    """Holders gc.get_referrers cannot see: another tensor's .grad or ._base, and an autograd node
    that saved it or accumulates into it (AccumulateGrad keeps its leaf), in the graph behind a
    live tensor or behind an autograd node a Python object keeps; named by the path to that
    tensor or node. A graph outlives its backward: its nodes and edges stay while a tensor made
    by it lives, and with them the AccumulateGrad of every leaf it reaches."""
    found = []
    roots = []  # (node, what keeps the graph: a live tensor, or the node itself)
    for o in live_tensors():
        if o is target:
            continue
        if o._grad is target:
            found.append(f".grad of a tensor {list(o.shape)}")
        if o._base is target:
            found.append(f"._base of a view {list(o.shape)}")
        if o.grad_fn is not None:
            roots.append((o.grad_fn, o))
    for o in gc.get_objects():
        try:
            if isinstance(o, (torch.autograd.graph.Node, torch.autograd.function.BackwardCFunction)):
                roots.append((o, o))
        except ReferenceError:
            continue
    # A C++ node's Python wrapper is made afresh when the last one died, and a new one can take a
    # dead one's id: every wrapper met stays alive until the walk ends, so ids name nodes.
    kept, seen = [], set()
    for root, keeper in roots:
        stack = [root]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            kept.append(node)
            seen.add(id(node))
            held = saved_by(node, target)
            if getattr(node, "variable", None) is target:
                held.append("variable")
            if held:
                path = referrer_paths(keeper, names, max_paths=1)
                what = (f"the graph of a tensor {list(keeper.shape)}" if isinstance(keeper, torch.Tensor)
                        else f"a {type(keeper).__name__}")
                found.append(f"{type(node).__name__}.{'/'.join(held)} in {what}" +
                             (f" held by {path[0]}" if path else ""))
            stack.extend(next_node for next_node, _ in getattr(node, "next_functions", ()) or ())
    return found


def who_holds(target, names):
    return referrer_paths(target, names) or cpp_holders(target, names) or ["no Python referrer and no C++ holder found"]
