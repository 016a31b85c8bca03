"""An iteration's allocations in PyTorch's memory snapshot form (torch.cuda.memory._snapshot()'s
dict, pickled), which `python -m torch.cuda._memory_viz trace_plot FILE -o OUT.html` draws.

On CUDA the snapshot is the caching allocator's own. On CPU it is made from the profiler's
allocation events, in the form recheck memory writes for its probe (cli/memory_snapshot.h):
every allocation and free as trace events, each with one frame naming the phase that made it
(forward; backward; the optimizer's step; "layer N", the recomputation of layer N's checkpoint and the backward through
it, found as an allocation under that checkpoint's backward node); the blocks alive at the end as
segments of one block; and the bytes held before the iteration that it never frees as one block
of their own, so that the viewer's total starts where the iteration started.
"""
import os
import pickle

from torch._C._profiler import _EventType

FORWARD, BACKWARD, STEP = "recheck: forward", "recheck: backward", "recheck: optimizer step"
CHECKPOINT_BACKWARD = "CheckpointFunctionBackward"
HELD_BEFORE_ADDRESS = 1 << 50  # above user-space addresses, exact as a JavaScript number


def _allocations(prof):
    """(start ns, address, bytes (< 0: a free), the names of the ops around it), in time order."""
    found = []

    def walk(event, around):
        if event.typed[0] == _EventType.Allocation:
            fields = event.typed[1]
            if fields.device.type == "cpu":
                found.append((event.start_time_ns, fields.ptr, fields.alloc_size, around))
        for child in event.children:
            walk(child, around + ((event.name, event.start_time_ns),))

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, ())
    return sorted(found, key=lambda a: a[0])


def _phase(around, layer_of):
    for name, start in reversed(around):
        if name.endswith(CHECKPOINT_BACKWARD) and name.startswith("autograd::engine::evaluate_function"):
            return f"layer {layer_of[start]}"
    names = [name for name, _ in around]
    if STEP in names:
        return "optimizer step"
    if BACKWARD in names or any(name.startswith("autograd::engine") for name in names):
        return "backward"
    return "forward" if FORWARD in names else "outside forward and backward"


def _frame(text):
    return [{"filename": "tools/model", "line": 0, "name": text}]


def _segment(address, size, frames):
    return {"device": 0, "address": address, "total_size": size, "allocated_size": size, "active_size": size,
            "requested_size": size, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [],
            "blocks": [{"size": size, "requested_size": size, "state": "active_allocated", "frames": frames}]}


def from_profiler(prof, run_name, held_before):
    """The snapshot of a CPU iteration the profiler watched; `held_before` is what was held when
    it began. Checkpoints' backward nodes run last layer first: the k-th of n is layer n - k + 1."""
    allocations = _allocations(prof)
    starts = sorted({start for _, _, _, around in allocations for name, start in around
                     if name.endswith(CHECKPOINT_BACKWARD) and name.startswith("autograd::engine::evaluate_function")})
    layer_of = {start: len(starts) - k for k, start in enumerate(starts)}
    trace, alive, freed_before = [], {}, 0
    for time_ns, address, size, around in allocations:
        phase = _phase(around, layer_of)
        event = {"addr": address, "stream": 0, "time_us": time_ns // 1000}
        if size > 0:
            trace.append(dict(event, action="alloc", size=size, frames=_frame(f"{run_name}: {phase}")))
            alive[address] = (size, phase)
            continue
        if alive.pop(address, None) is None:
            freed_before += -size
        for action in ("free_requested", "free_completed"):
            trace.append(dict(event, action=action, size=-size, frames=_frame(f"{run_name}: freed in {phase}")))
    segments = []
    if held_before - freed_before > 0:
        segments.append(_segment(HELD_BEFORE_ADDRESS, held_before - freed_before,
                                 _frame(f"{run_name}: held before the iteration and throughout it (parameters, "
                                        "the optimizer's state, what the previous iteration left)")))
    segments += [_segment(address, size, _frame(f"{run_name}: {phase}, still held at the end"))
                 for address, (size, phase) in sorted(alive.items())]
    return {"segments": segments, "device_traces": [trace]}


def write(snapshot, path):
    """Written whole or not at all."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        pickle.dump(snapshot, out)
    os.replace(tmp, path)
