#!/usr/bin/env python3
"""recheck memory's picture in a real browser: headless Chromium (Debian's `chromium`) loads the
SVG, and this test checks what it shows, from its DOM and from its screenshot.

  tests/picture_in_browser.py RECHECK OUT_DIR

Leaves OUT_DIR/memory.svg and OUT_DIR/memory.png (look at it). Exit 0 passed, 1 failed, 77
skipped (no chromium on PATH: `apt-get install chromium`; ci/setup installs it).
"""
import json
import os
import struct
import subprocess
import sys
import zlib

import headless_chromium

# What the picture must show for this model: three layers, each recomputed; the two runs'
# colours (cli/memory.cpp); the floors of both, in binary units.
LAYERS = 3
ORACLE, SUT = (0x1F, 0x77, 0xB4), (0xD6, 0x27, 0x28)
WIDTH, HEIGHT, PLOT_TOP, PLOT_BOTTOM = 960, 470, 92, 470 - 86  # cli/memory_picture.cpp's frame


def fail(message):
    print(f"picture_in_browser: FAIL: {message}")
    sys.exit(1)


def png_pixels(path):
    """The RGB rows of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    chunks, at = {}, 8
    idat = b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IDAT":
            idat += body
        else:
            chunks[kind] = body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"{path}: a PNG this test does not read (depth {depth}, colour type {colour}, interlace {interlace})")
    step = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    rows, previous, stride = [], bytearray(width * step), width * step
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up = previous[x]
            corner = previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, step)])
        previous = line
    return rows


def near(pixel, colour, tolerance=40):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def main(recheck, out):
    browser = headless_chromium.find()
    if browser is None:
        print("picture_in_browser: skipped: no chromium on PATH (apt-get install chromium)")
        return 77
    os.makedirs(out, exist_ok=True)
    svg, png, report = (os.path.join(out, name) for name in ("memory.svg", "memory.png", "memory.json"))
    run = subprocess.run([recheck, "memory", "--layers", str(LAYERS), "--streams", "4", "--seq", "64", "--hidden", "32",
                          "--svg", svg, "--json", report], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"recheck memory exited {run.returncode}: {run.stdout}{run.stderr}")
    floors = json.load(open(report))["iterations"][-1]

    dom = headless_chromium.run(browser, "--dump-dom", "file://" + svg)
    if dom.returncode != 0:
        fail(f"chromium --dump-dom exited {dom.returncode}: {dom.stderr[-500:]}")
    shown = dom.stdout
    expected = [f">layer {n}<" for n in range(1, LAYERS + 1)] + [">forward<", "bytes held",
                                                                "layer N: its recomputation, then its backward"]
    expected += [f"floor of oracle nonclearing: {floors['floor_oracle'] // 1024}.00 KiB",
                 f"floor of sut clearing: {floors['floor_sut'] // 1024}.00 KiB"]
    for text in expected:
        if text not in shown:
            fail(f"the page shows no {text!r}")

    shot = headless_chromium.run(browser, f"--screenshot={png}", "file://" + svg, window=(WIDTH, HEIGHT))
    if shot.returncode != 0 or not os.path.exists(png):
        fail(f"chromium --screenshot exited {shot.returncode}: {shot.stderr[-500:]}")
    rows = png_pixels(png)
    if len(rows) != HEIGHT or len(rows[0]) != WIDTH:
        fail(f"the screenshot is {len(rows[0])}x{len(rows)}, not {WIDTH}x{HEIGHT}")
    # Both runs' lines are drawn inside the plot, and the legend rows above it hold only the two
    # swatches and text: no line crosses them.
    for name, colour in (("oracle", ORACLE), ("sut", SUT)):
        inside = sum(near(p, colour) for row in rows[PLOT_TOP:PLOT_BOTTOM] for p in row)
        if inside < 300:
            fail(f"the {name}'s line covers {inside} pixels of the plot (expected a line across it)")
        legend = sum(near(p, colour) for row in rows[30:PLOT_TOP - 4] for p in row[120:])
        if legend > 0:
            fail(f"{legend} pixels of the {name}'s colour in the legend rows, right of its swatch")
    print(f"picture_in_browser: OK: {svg} shows {len(expected)} expected labels, both lines in the plot and a clear "
          f"legend; screenshot {png}")
    return 0


if __name__ == "__main__":
    headless_chromium.main_of(main, __doc__)
