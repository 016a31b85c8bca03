#!/usr/bin/env python3
"""Checks a memory snapshot recheck wrote (recheck memory --snapshot, tools/model --snapshot) the
way PyTorch's viewer reads it, under a Python with torch:

  tests/check_memory_snapshot.py PICKLE FLOOR [PHASE...]

renders it with `python -m torch.cuda._memory_viz trace_plot` and requires the page to embed the
same snapshot; replays the trace as the viewer stacks it (a block freed without having been
allocated in the trace, and every active block of the segments the trace did not allocate, are
there from the start) and requires the total never to go below zero and to end at FLOOR bytes,
what the segments hold; and requires an allocation made in each PHASE (the frames' names end
with ": PHASE"). Prints one line; exit 0 when all hold, 1 otherwise.
"""
import base64
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile


def fail(message):
    print(f"check_memory_snapshot: FAIL: {message}")
    sys.exit(1)


def main(path, floor, phases):
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    with tempfile.TemporaryDirectory() as folder:
        html = os.path.join(folder, "trace.html")
        rendered = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", path, "-o", html],
                                  capture_output=True, text=True)
        if rendered.returncode != 0 or not os.path.exists(html):
            fail(f"trace_plot exited {rendered.returncode}: {rendered.stderr[-800:]}")
        page = open(html).read()
    embedded = re.search(r"const local_files = (\[.*?\])\n", page)
    if not embedded:
        fail("the page embeds no snapshot")
    files = json.loads(embedded.group(1))
    if pickle.loads(base64.b64decode(files[0]["base64"])) != snapshot:
        fail("the page embeds another snapshot than the file's")

    trace = snapshot["device_traces"][0]
    allocated = {}
    total = 0
    for e in trace:
        if e["action"] == "alloc":
            allocated[e["addr"]] = e["size"]
        elif e["action"] == "free_completed" and allocated.pop(e["addr"], None) is None:
            total += e["size"]
    for segment in snapshot["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and address not in allocated:
                total += block["requested_size"]
            address += block["size"]
    lowest = total
    for e in trace:
        total += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        lowest = min(lowest, total)
    held_at_end = sum(b["requested_size"] for s in snapshot["segments"] for b in s["blocks"]
                      if b["state"] == "active_allocated")
    if lowest < 0:
        fail(f"the viewer's total goes down to {lowest} bytes")
    if total != held_at_end or total != floor:
        fail(f"the trace ends at {total} bytes, the segments hold {held_at_end}, the floor is {floor}")
    made_in = {e["frames"][0]["name"].split(": ", 1)[-1] for e in trace if e["action"] == "alloc" and e["frames"]}
    missing = [p for p in phases if p not in made_in]
    if missing:
        fail(f"no allocation in {missing}; phases seen: {sorted(made_in)}")
    print(f"check_memory_snapshot: OK: {path}: {len(trace)} events, rendered by trace_plot, ends at the floor "
          f"{floor} bytes, allocations in {', '.join(phases) or 'no phase asked'}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
