#!/usr/bin/env python3
"""recheck memory's snapshot in PyTorch's own viewer, offline: tools/memory-viz-offline makes the
page, headless Chromium draws it, and this test checks the drawing from its DOM.

  tests/snapshot_in_browser.py RECHECK OUT_DIR

Needs RECHECK_MEMORY_VIZ_JS (torch/utils/viz/MemoryViz.js from a PyTorch source tree; the wheel
does not ship it), d3 version 5 as one script (RECHECK_D3_JS, default Debian's node-d3 at
/usr/share/nodejs/d3/dist/d3.js) and chromium; exit 77 (skipped) naming what is missing. Leaves
OUT_DIR/snapshot-sut.html and OUT_DIR/snapshot-sut.png. Exit 0 passed, 1 failed.
"""
import os
import re
import subprocess
import sys

import headless_chromium

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")


def main(recheck, out):
    viewer = os.environ.get("RECHECK_MEMORY_VIZ_JS", "")
    d3 = os.environ.get("RECHECK_D3_JS", "/usr/share/nodejs/d3/dist/d3.js")
    browser = headless_chromium.find()
    missing = [what for what, there in (("RECHECK_MEMORY_VIZ_JS (PyTorch's MemoryViz.js)", viewer and os.path.isfile(viewer)),
                                        (f"d3 5 at {d3} (apt-get install node-d3, or RECHECK_D3_JS)", os.path.isfile(d3)),
                                        ("chromium", browser)) if not there]
    if missing:
        print(f"snapshot_in_browser: skipped: no {', no '.join(missing)}")
        return 77
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "snapshot")
    run = subprocess.run([recheck, "memory", "--svg", "", "--snapshot", prefix], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"snapshot_in_browser: FAIL: recheck memory exited {run.returncode}: {run.stdout}{run.stderr}")
        return 1
    page, png = prefix + "-sut.html", prefix + "-sut.png"
    made = subprocess.run([sys.executable, os.path.join(TOOLS, "memory-viz-offline"), prefix + "-sut.pickle", page,
                           "--viewer", viewer, "--d3", d3], capture_output=True, text=True)
    if made.returncode != 0:
        print(f"snapshot_in_browser: FAIL: tools/memory-viz-offline exited {made.returncode}: {made.stderr}")
        return 1
    dom = headless_chromium.run(browser, "--dump-dom", "file://" + page, window=(1400, 900), wait_ms=10000).stdout
    headless_chromium.run(browser, f"--screenshot={png}", "file://" + page, window=(1400, 900), wait_ms=10000)
    # The timeline: one polygon an allocation drawn, a y axis in bytes, the snapshot's name.
    polygons = len(re.findall(r"<polygon", dom))
    if polygons < 50 or "snapshot-sut.pickle" not in dom or "Active Memory Timeline" not in dom:
        print(f"snapshot_in_browser: FAIL: the page draws {polygons} polygons (expected the allocations of an "
              f"iteration), or names no snapshot; DOM starts {dom[:300]!r}")
        return 1
    print(f"snapshot_in_browser: OK: {page} draws {polygons} allocations; screenshot {png}")
    return 0


if __name__ == "__main__":
    headless_chromium.main_of(main, __doc__)
